"""Every directory fleet creates is 0700 and every file 0600: FLEET_HOME itself, workers/, each
worker's directory and everything in them, after a realistic session (registration, hook
events and a hook failure, a cached status, doctor, a headless run on an endpoint)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet._cli import main
from fleet._hook_command import hook_argv
from fleet._orchestrate import start_worker
from fleet._orchestrate._start import _profile_lock
from tests.conftest import Repo, git_worktree

from .conftest import KEY, FakeAgent
from .test_start import brief, exited


@pytest.fixture
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def _hook(home: Path, worker: str, payload: dict[str, object]) -> None:
    env = {"PATH": os.environ["PATH"], "FLEET_HOME": str(home), "FLEET_WORKER": worker}
    subprocess.run(hook_argv("claude", home=home), input=json.dumps(payload).encode(), env=env,
                   capture_output=True, timeout=60, check=True)


def test_everything_fleet_creates_is_private(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    usual_umask: None, capsys: pytest.CaptureFixture[str],
) -> None:
    assert not home.exists()
    worktree = git_worktree(tmp_path / "wt")
    assert main(["register", "w1", "--worktree", str(worktree)]) == 0
    _hook(home, "w1", {"hook_event_name": "UserPromptSubmit", "session_id": "s"})
    _hook(home, "w1", {"hook_event_name": "Stop", "last_assistant_message": "done"})
    _hook(home, "NOT-A-WORKER", {"hook_event_name": "Stop"})  # a failure, logged
    assert main(["status", "--json"]) == 0
    assert main(["seen", "w1@2"]) == 0
    assert main(["doctor", "--clear-errors", "--json"]) in (0, 1)
    monkeypatch.setenv("FLEET_TEST_KEY", KEY)
    opts = fake.options(endpoint="http://127.0.0.1:9/", key_from="env:FLEET_TEST_KEY")
    start_worker("api-1", task=brief(tmp_path), repo=repo.path, options=opts)
    exited(home, "api-1")
    with _profile_lock(home, "claude:work"):
        pass
    assert main(["status", "--json"]) == 0
    capsys.readouterr()

    wrong = []
    found = {"dirs": 0, "files": 0}
    for path in [home, *home.rglob("*")]:
        st = path.lstat()
        kind = "dirs" if stat.S_ISDIR(st.st_mode) else "files"
        found[kind] += 1
        want = 0o700 if kind == "dirs" else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            wrong.append(f"{oct(stat.S_IMODE(st.st_mode))} {path.relative_to(home.parent)}")
    assert not wrong, wrong
    names = {p.name for p in home.rglob("*")}
    # The walk saw what a session leaves behind.
    assert {"workers", "cache", "locks", "journal.jsonl", "worktrees.tsv", "hook-errors.log.old",
            "launch.json", "supervisor.json", "config", "settings.json"} <= names
    assert found["files"] >= 12
