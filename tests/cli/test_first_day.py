"""A new user's first day, through the command line: the install it says is true, unknown
names are refused with the closest match before anything is made, lookups say why they found
nothing, and checks say what is missing and what to do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fleet._cli import main
from fleet._cli._common import Exit
from tests.conftest import Repo

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: --help, usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# -- item 1: the install lines are true ----------------------------------------------------


def test_version_names_the_distribution_and_where_it_came_from() -> None:
    done = subprocess.run([sys.executable, "-m", "fleet", "--version"], capture_output=True,
                          text=True, check=True)
    import fleet

    assert fleet.__version__ == "0.1.0"
    assert done.stdout.startswith(f"fleet {fleet.__version__} (fleet-agents, from ")
    # This test environment installs the checkout itself (editable).
    assert done.stdout.strip().endswith(f"from {ROOT})")


def test_nothing_claims_fleet_is_on_a_package_index() -> None:
    readme = (ROOT / "README.md").read_text()
    texts = [readme, (ROOT / "skill" / "README.md").read_text()]
    texts += [p.read_text() for p in (ROOT / "src" / "fleet").rglob("*.py")]
    for text in texts:
        assert not re.search(r"pip(x)? install '?fleet-agents", text)
        assert "uv tool install fleet-agents" not in text
        assert "published on PyPI" not in text
    assert "pipx install ." in readme and "uv tool install ." in readme


def test_an_extra_hint_names_this_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    from fleet import _install

    hint = _install.extra_hint("mcp")
    # The test environment is an editable install of this checkout, by pip.
    assert hint == f"{sys.executable} -m pip install -e '{ROOT}[mcp]'"
    found = _install.installation()
    for tool, command in (("pipx", "pipx install --force"), ("uv", "uv tool install --force")):
        monkeypatch.setattr(_install, "installation",
                            lambda tool=tool: _install.Installation(
                                version="0.1.0", source="/src/fleet", editable=False, tool=tool,
                                python=found.python))
        assert _install.extra_hint("hub") == f"{command} '/src/fleet[hub]'"
    monkeypatch.setattr(_install, "installation", lambda: _install.Installation(
        version="unknown", source=None, editable=False, tool="pip", python="/py"))
    assert _install.extra_hint("hub") == "/py -m pip install 'nats-py>=2.7' 'nkeys>=0.2'"


def test_mcp_without_the_sdk_refuses_to_install_and_says_how(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import fleet._mcp

    monkeypatch.setattr(fleet._mcp, "sdk_available", lambda: False)
    config = tmp_path / "claude"
    config.mkdir()
    code, out, err = run(capsys, "mcp", "install", "--config-dir", str(config))
    assert (code, out) == (Exit.ERROR, "")
    assert err.startswith("fleet: fleet mcp needs the MCP SDK, an optional extra: ")
    assert f"-m pip install -e '{ROOT}[mcp]'" in err and "nothing was installed" in err
    assert list(config.iterdir()) == []
    code, out, err = run(capsys, "mcp", "serve")
    assert code == Exit.ERROR and "fleet-agents" not in err and f"'{ROOT}[mcp]'" in err


# -- item 4: an unknown profile is refused before anything is made ---------------------------


def _made(home: Path, repo: Path) -> list[str]:
    found = [str(p.relative_to(home)) for p in home.rglob("*")] if home.exists() else []
    sibling = repo.parent / f"{repo.name}.fleet"
    return found + ([str(sibling)] if sibling.exists() else [])


def test_start_on_an_unknown_profile_names_the_known_ones_and_the_closest(
    capsys: pytest.CaptureFixture[str], home: Path, repo: Repo, tmp_path: Path
) -> None:
    for name in ("work", "personal"):
        (tmp_path / name).mkdir()
        assert run(capsys, "profiles", "add", name, "--config-dir", str(tmp_path / name))[0] == 0
    brief = tmp_path / "brief.md"
    brief.write_text("Do it.\n")
    before = _made(home, repo.path)
    code, out, err = run(capsys, "start", "z1", "--task", str(brief), "--repo", str(repo.path),
                         "--profile", "claude:wrok")
    assert (code, out) == (Exit.ERROR, "")
    assert err == ("fleet: no profile 'claude:wrok' (there are: claude:work, claude:personal): "
                   "did you mean claude:work?\n")
    code, _, err = run(capsys, "start", "z1", "--task", str(brief), "--repo", str(repo.path),
                       "--profile", "claude:nobody")
    assert code == Exit.ERROR
    assert err.startswith("fleet: no profile 'claude:nobody' (there are: claude:work, "
                          "claude:personal): add one with `fleet profiles add")
    assert _made(home, repo.path) == before
    assert not (home / "workers" / "z1").exists()
