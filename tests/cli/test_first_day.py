"""A new user's first day, through the command line: the install it says is true, unknown
names are refused with the closest match before anything is made, lookups say why they found
nothing, and checks say what is missing and what to do."""

from __future__ import annotations

import json
import os
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


# -- item 7: wait says when there is nothing to wait for; a failed check stays attention -----


def test_wait_with_no_workers_says_so_at_once(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    code, out, err = run(capsys, "wait")  # no timeout: it would block forever before
    assert (code, out) == (Exit.USAGE, "")
    assert err == ("fleet: wait: no workers to wait for (none is registered): start one "
                   "(`fleet start`), or wait for new ones (`fleet wait --for-new`)\n")
    code, out, _ = run(capsys, "wait", "--for-new", "--timeout", "0.2", "--json")
    assert code == Exit.TIMEOUT and json.loads(out)["result"] == "timeout"


def test_a_failed_check_needs_attention_until_the_coordinator_acts(
    capsys: pytest.CaptureFixture[str], home: Path, repo: Repo
) -> None:
    from fleet import Fleet
    from tests.finish._helpers import add_worktree, commit, register

    with Fleet() as fleet:
        path = add_worktree(repo, "bad1")
        commit(path)  # committed, never pushed: the check fails
        register(fleet, "bad1", path, "fleet/bad1")
    code, out, _ = run(capsys, "wait", "--json", "--timeout", "5")
    assert code == Exit.OK
    claim = json.loads(out)["attention"][0]["mark"]
    code, _, _ = run(capsys, "check", "bad1", "--json")
    assert code == Exit.REFUSED
    code, out, _ = run(capsys, "wait", "--json", "--seen", claim, "--timeout", "5")
    assert code == Exit.OK, "a failed check was taken as handled"
    (woken,) = json.loads(out)["attention"]
    assert (woken["state"], woken["reason"]) == ("done", "failed") and woken["mark"] != claim
    assert run(capsys, "seen", woken["mark"])[0] == Exit.OK
    code, out, _ = run(capsys, "wait", "--json", "--seen", claim, "--timeout", "0.2")
    assert code == Exit.TIMEOUT


# -- item 9: the right words, and lookups that say why they found nothing -------------------


def test_no_help_text_says_profiles_are_clausona_only(
    capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["start", "--help"], ["hooks", "install", "--help"], ["mcp", "install", "--help"],
                 ["register", "--help"], ["hand-over", "--help"], ["trust", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0
        assert "clausona profile" not in out, argv


def test_settings_get_tells_unset_from_a_typo_and_settings_alone_shows_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / "fleet.json"))
    assert run(capsys, "settings", "get", "retire") == (
        Exit.ERROR, "", "fleet: settings get: retire is not set (default: ask)\n")
    code, out, err = run(capsys, "settings", "get", "retrie")
    assert (code, out) == (Exit.USAGE, "")
    assert err.startswith("fleet: settings get: unknown settings key 'retrie' (did you mean "
                          "retire?)")
    assert run(capsys, "settings") == (
        Exit.OK, f"no settings in {tmp_path / 'fleet.json'}: every key has its default "
        "(`fleet settings --help` lists them)\n", "")
    assert run(capsys, "settings", "set", "retire", "auto")[0] == Exit.OK
    assert run(capsys, "settings", "get", "retire") == (Exit.OK, "auto\n", "")
    code, out, _ = run(capsys, "settings", "--json")
    assert code == Exit.OK and json.loads(out) == {"retire": "auto"}


def test_typos_of_commands_and_worker_ids_name_the_closest(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "stauts")
    assert (code, out) == (Exit.USAGE, "")
    assert err == ("fleet: argument COMMAND: invalid choice: 'stauts': did you mean 'status'? "
                   "(see `fleet --help`)\n")
    code, _, err = run(capsys, "hooks", "instal")
    assert code == Exit.USAGE and "did you mean 'install'?" in err
    code, _, err = run(capsys, "xyzzy")
    assert code == Exit.USAGE and "(choose from " in err and "did you mean" not in err
    assert run(capsys, "register", "parser", "--worktree", str(tmp_path), "--any-dir")[0] == 0
    for argv in (["status", "prser"], ["log", "prser"], ["wait", "prser", "--timeout", "0"]):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (Exit.ERROR, ""), argv
        assert err == f"fleet: no worker 'prser' in {home} (did you mean parser?)\n", argv
    code, _, err = run(capsys, "status", "zzz")
    assert err == f"fleet: no worker 'zzz' in {home} (register it first)\n"


def test_one_worker_is_not_one_workers(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    assert run(capsys, "register", "parser", "--worktree", str(tmp_path), "--any-dir")[0] == 0
    code, out, _ = run(capsys, "status")
    assert code == Exit.OK and out.rstrip().endswith("\n\n1 worker, 0 need attention")
    code, out, _ = run(capsys, "report")
    assert code == Exit.OK and "\n1 worker: " in out and "1 workers" not in out


def test_a_plan_that_cannot_start_every_task_exits_4_and_says_whether_to_ask(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / "fleet.json"))
    (tmp_path / "work").mkdir()
    assert run(capsys, "profiles", "add", "work", "--config-dir", str(tmp_path / "work"))[0] == 0
    (tmp_path / "b.md").write_text("Do it.\n")
    tasks = tmp_path / "TASKS.toml"
    tasks.write_text('[[task]]\nname = "a"\nbrief = "b.md"\n')
    code, out, _ = run(capsys, "plan", str(tasks), "--coordinator-tool", "codex")
    assert code == Exit.OK
    assert out.rstrip().endswith("ask before starting it; `fleet run` does not ask")
    tasks.write_text('[[task]]\nname = "a"\nbrief = "b.md"\nprofile = "claude:gone"\n')
    code, out, _ = run(capsys, "plan", str(tasks), "--start", "--coordinator-tool", "codex")
    assert code == Exit.REFUSED
    assert out.rstrip().splitlines()[-1].startswith("not ready: ")


# -- item 10: checks that say what is missing ------------------------------------------------


def test_a_config_dir_that_does_not_exist_is_refused_unless_create(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fleet._mcp

    monkeypatch.setattr(fleet._mcp, "sdk_available", lambda: True)
    typo = tmp_path / ".cluade"
    worktree = tmp_path / "wt"
    worktree.mkdir()
    for argv in (["hooks", "install", "--config-dir", str(typo)],
                 ["trust", "--config-dir", str(typo), "--path", str(worktree)],
                 ["mcp", "install", "--config-dir", str(typo)],
                 ["hooks", "install", "--codex-home", str(tmp_path / ".codx")]):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (Exit.ERROR, ""), argv
        assert "does not exist (a typo?)" in err and "--create" in err, argv
    assert not typo.exists() and not (tmp_path / ".codx").exists()
    code, _, _ = run(capsys, "hooks", "install", "--config-dir", str(typo), "--create")
    assert code == Exit.OK and (typo / "settings.json").is_file()


def test_profiles_add_says_a_file_is_not_a_config_dir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / "fleet.json"))
    afile = tmp_path / "notes.txt"
    afile.write_text("x\n")
    code, out, err = run(capsys, "profiles", "add", "work", "--config-dir", str(afile))
    assert (code, out) == (Exit.ERROR, "")
    assert err == (f"fleet: --config-dir {afile} is a file, not a directory: name the Claude "
                   "Code config dir itself; nothing was added\n")
    assert not (tmp_path / "fleet.json").exists()


# -- item 2: hooks that survive a moved or removed fleet -------------------------------------


def _installed_command(config: Path) -> str:
    settings = json.loads((config / "settings.json").read_text())
    command: str = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    return command


def test_hooks_survive_a_moved_fleet_and_one_install_repoints_every_profile(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / "fleet.json"))
    default = Path(os.environ["HOME"]) / ".claude"
    default.mkdir()
    profiles = [tmp_path / "work", tmp_path / "personal"]
    for config in profiles:
        config.mkdir()
        assert run(capsys, "profiles", "add", config.name, "--config-dir", str(config))[0] == 0
    assert run(capsys, "hooks", "install", "--config-dir", str(default))[0] == Exit.OK
    assert run(capsys, "hooks", "install", "--all-profiles")[0] == Exit.OK
    # fleet's venv moves away: the launcher every hook runs names an interpreter that is gone.
    launcher = home / "bin" / "fleet-hook"
    text = launcher.read_text()
    assert f"py={sys.executable}" in text
    launcher.write_text(text.replace(f"py={sys.executable}", "py=/moved/away/.venv/bin/python3"))
    payload = json.dumps({"session_id": "s1", "hook_event_name": "Stop", "cwd": str(tmp_path)})
    for config in (default, *profiles):
        done = subprocess.run(["/bin/sh", "-c", _installed_command(config)], input=payload,
                              capture_output=True, text=True, timeout=30, check=False)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), config
    code, out, _ = run(capsys, "hooks", "status", "--all-profiles")
    assert code == Exit.ERROR and out.count("which is gone (fleet was moved or removed)") == 2
    code, out, _ = run(capsys, "doctor")
    assert code == Exit.ERROR
    assert "problem: the hook found no fleet to run" in out
    assert "  do: fleet hooks install   # repoints every config dir at this fleet" in out
    # One command, no target: every config dir with fleet's hook runs this fleet again.
    code, out, _ = run(capsys, "hooks", "install")
    assert code == Exit.OK and out.startswith(f"hook launcher {launcher} now runs this fleet")
    assert out.count(": unchanged (") == 3  # the commands name the launcher: not rewritten
    code, out, _ = run(capsys, "hooks", "status", "--all-profiles", "--json")
    statuses = json.loads(out)
    assert code == Exit.OK and all(s["will_run"] for s in statuses) and len(statuses) == 2
    assert not (home / "hook-fleet-missing").exists()


def test_hooks_install_with_no_target_and_no_hook_anywhere_says_what_to_name(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    code, out, err = run(capsys, "hooks", "install")
    assert (code, out) == (Exit.ERROR, "")
    assert err == ("fleet: fleet's hook is installed nowhere yet: name a target: --config-dir "
                   "DIR, --codex-home DIR, --profile NAME or --all-profiles\n")
    assert not (home / "bin").exists()


# -- item 8: output that fits the terminal; colour there, plain when piped -------------------


def _long_workers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from fleet import Fleet, HookEvent

    for name in ("parser-with-a-long-name", "docs"):
        (tmp_path / name).mkdir()
        assert run(capsys, "register", name, "--worktree", str(tmp_path / name), "--any-dir",
                   "--branch", "fleet/" + name * 3, "--profile", "claude:work")[0] == 0
    with Fleet() as fleet:
        fleet.record("docs", HookEvent(ts=fleet.clock.now(), src="claude", hook="Stop", data={
            "last_assistant_message": "FLEET_WORKER_BLOCKED: " + "needs a decision " * 12}))


def test_status_fits_the_terminal_in_colour_and_is_plain_and_whole_when_piped(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fleet import _text

    _long_workers(capsys, tmp_path)
    code, piped, _ = run(capsys, "status")
    assert code == Exit.OK and "\x1b[" not in piped
    assert max(len(line) for line in piped.splitlines()) > 120  # whole: nothing cut
    assert "…" not in piped
    monkeypatch.setattr(_text, "terminal_width", lambda stream=None: 80)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    code, shown, _ = run(capsys, "status")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)
    assert code == Exit.OK and max(len(line) for line in plain.splitlines()) <= 80
    assert "\x1b[1;31mblocked" in shown  # the state in colour, as `fleet watch` shows it
    assert "! docs" in plain and "parser-with-a-long-name" in plain  # the ids are never cut
    monkeypatch.setenv("NO_COLOR", "1")
    code, shown, _ = run(capsys, "status")
    assert "\x1b[" not in shown and max(len(line) for line in shown.splitlines()) <= 80
    code, out, _ = run(capsys, "status", "--json")
    assert json.loads(out)[0]["worker"] == "docs"  # --json unchanged by the terminal


def test_the_terminal_is_found_through_a_real_pty() -> None:
    import pty

    from fleet import _text

    leader, follower = pty.openpty()
    try:
        with open(follower, "w", closefd=False) as stream:
            assert _text.terminal_width(stream) is not None
        with open(os.devnull, "w") as stream:
            assert _text.terminal_width(stream) is None
    finally:
        os.close(leader)
        os.close(follower)


def test_report_and_help_fit_80_columns(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fleet import _text

    _long_workers(capsys, tmp_path)
    monkeypatch.setattr(_text, "terminal_width", lambda stream=None: 80)
    code, out, _ = run(capsys, "report")
    assert code == Exit.OK and max(len(line) for line in out.splitlines()) <= 80, out
    monkeypatch.setenv("COLUMNS", "80")
    for argv in (["profiles", "--help"], ["hooks", "install", "--help"], ["wait", "--help"],
                 ["--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and max(len(line) for line in out.splitlines()) <= 100, argv


# -- item 11: the README's opening, completion, help(fleet) ----------------------------------


def test_the_readme_opens_with_what_fleet_is_and_needs() -> None:
    readme = (ROOT / "README.md").read_text()
    opening = readme[: readme.index("```sh")]
    for needed in ("Python 3.11", "git", "Linux or macOS", "Node.js"):
        assert needed in opening, needed
    assert "apt" in readme[: readme.index("## What it is")] and "root" in readme
    first = readme.index("clausona")
    assert "a tool that" in readme[first: first + 200], "clausona is explained where first used"
    assert not re.search(r"`fleet\._[a-z]", readme), "the README documents no private module"


def _complete(script: str, *words: str, env: dict[str, str] | None = None) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    done = subprocess.run(
        ["bash", "-c", f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _fleet; '
                       'printf "%s\\n" "${COMPREPLY[@]}"'],
        capture_output=True, text=True, timeout=30, check=True, env=env)
    return done.stdout.split()


def test_bash_completion_knows_commands_actions_options_and_worker_ids(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    code, script, _ = run(capsys, "completion", "bash")
    assert code == Exit.OK and script.endswith("complete -F _fleet fleet\n")
    assert _complete(script, "fleet", "sta") == ["start", "status"]
    assert _complete(script, "fleet", "hooks", "in") == ["install"]
    assert "--create" in _complete(script, "fleet", "hooks", "install", "--")
    assert _complete(script, "fleet", "wait", "w1", "--for") == ["--for-new"]
    (tmp_path / "wt").mkdir()
    assert run(capsys, "register", "parser", "--worktree", str(tmp_path / "wt"),
               "--any-dir")[0] == 0
    env = {**os.environ, "FLEET_HOME": str(home)}
    assert _complete(script, "fleet", "check", "pa", env=env) == ["parser"]
    code, zsh, _ = run(capsys, "completion", "zsh")
    assert zsh.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    code, out, _ = run(capsys, "completion", "bash", "--json")
    assert json.loads(out) == {"shell": "bash", "script": script}


def test_help_fleet_starts_with_a_useful_page() -> None:
    code = ("import pydoc, fleet; "
            "print(pydoc.render_doc(fleet, renderer=pydoc.plaintext))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    first_page = "\n".join(done.stdout.splitlines()[:50])
    assert "with fleet.Fleet() as f:" in first_page and "f.wait(" in first_page
    assert "check_worker" in first_page and "Retirer" in first_page


def test_a_sentence_folds_to_the_terminal_and_stays_whole_when_piped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet import _text
    from fleet._cli._common import say

    text = "w1: retired; /a/very/long/worktree/path removed, branch fleet/w1 kept, " * 4
    say(text)
    assert capsys.readouterr().out == text + "\n"
    monkeypatch.setattr(_text, "terminal_width", lambda stream=None: 60)
    say(text)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 1 and max(len(line) for line in lines) <= 60
    assert all(line.startswith("  ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == " ".join(text.split())


def test_ship_without_a_hub_names_its_own_option(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / "fleet.json"))
    monkeypatch.delenv("FLEET_HUB", raising=False)
    code, out, err = run(capsys, "ship", "--once")
    assert (code, out) == (Exit.ERROR, "")
    assert err == ("fleet: no hub named: pass --nats URL, set FLEET_HUB, or `fleet settings set "
                   "hub.url URL`\n")
    code, _, err = run(capsys, "hosts")
    assert code == Exit.ERROR and "pass --hub URL" in err


def test_doctor_warns_of_another_fleet_on_path(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = tmp_path / "other-bin"
    other.mkdir()
    (other / "fleet").write_text("#!/old/checkout/.venv/bin/python3\nimport fleet\n")
    (other / "fleet").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{os.environ['PATH']}")
    code, out, _ = run(capsys, "doctor")
    assert code == Exit.ERROR  # nothing else is set up here; the warning alone would not fail
    assert (f"warning: `fleet` on PATH ({other / 'fleet'}) runs another installation "
            f"(/old/checkout/.venv/bin/python3) than this one ({sys.executable})") in out
    assert "  do: use one fleet: remove the other, or put this one first on PATH" in out
