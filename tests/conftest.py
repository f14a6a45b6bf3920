"""Fixtures shared by the whole suite. Every test gets its own FLEET_HOME and git identity;
nothing reads or writes the real home directory."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest


@pytest.fixture(autouse=True, scope="session")
def _machine_left_whole() -> Iterator[None]:
    """No test may damage the machine it runs on: a write that renamed a file over /dev/null
    (fleet given it as a path) would break every later process that opens it."""
    yield
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode), "a test replaced /dev/null"


@pytest.fixture(autouse=True)
def _hermetic_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private FLEET_HOME and a git config that knows nothing of the machine's."""
    base = tmp_path_factory.mktemp("env")
    monkeypatch.setenv("FLEET_HOME", str(base / "fleet-home"))
    gitconfig = base / "gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = Fleet Test\n\temail = fleet@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("FLEET_WORKER", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def home() -> Path:
    return Path(os.environ["FLEET_HOME"])


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return out.stdout.strip()


@attrs.frozen
class Repo:
    """A clone with one pushed commit on main, and its local bare origin."""

    path: Path
    remote: Path

    def git(self, *args: str) -> str:
        return git(self.path, *args)


def make_repo(root: Path) -> Repo:
    remote = root / "origin.git"
    path = root / "repo"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "clone", "-q", str(remote), str(path)], check=True, capture_output=True)
    (path / "README.md").write_text("demo\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    git(path, "push", "-q", "-u", "origin", "main")
    return Repo(path=path, remote=remote)


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    yield make_repo(tmp_path)
