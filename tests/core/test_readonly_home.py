"""A FLEET_HOME that cannot be written: commands that only read still work (they must not
fail trying to write the fold cache) and write nothing.

The home is made read-only for real, by taking its write bits away. Root (CI) ignores modes, so
as root the commands run without the capabilities that let it (CAP_DAC_OVERRIDE,
CAP_DAC_READ_SEARCH, CAP_FOWNER, dropped from the bounding set before exec): still uid 0, the
home's owner, but held to its modes like anyone else."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import pytest

from fleet import Fleet, HookEvent
from fleet._home import cache_dir
from fleet._hook_command import hook_argv

#: Drops the capabilities that let root ignore file modes, then runs its arguments.
_WITHOUT_DAC = """
import ctypes, os, sys
prctl = ctypes.CDLL(None, use_errno=True).prctl
for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
    if prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
        sys.exit("cannot drop capability %d: errno %d" % (cap, ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
"""


def held_to_modes(argv: Sequence[str]) -> list[str]:
    """``argv``, run so that file modes apply to it even as root."""
    if os.geteuid() != 0:
        return list(argv)
    return [sys.executable, "-c", _WITHOUT_DAC, *argv]


@attrs.frozen
class ReadOnlyHome:
    path: Path
    worktree: Path
    scratch: Path

    def run(
        self, *argv: str, env: dict[str, str] | None = None, stdin: str | None = None,
        program: Sequence[str] = (sys.executable, "-m", "fleet"),
    ) -> subprocess.CompletedProcess[str]:
        full = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.scratch),
            "FLEET_HOME": str(self.path),
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8",
            **(env or {}),
        }
        return subprocess.run(
            held_to_modes([*program, *argv]), env=full, capture_output=True, text=True,
            timeout=120, check=False, input=stdin,
        )

    def snapshot(self) -> dict[str, tuple[int, int, int]]:
        out = {}
        for p in [self.path, *self.path.rglob("*")]:
            st = p.lstat()
            out[str(p)] = (st.st_mode, st.st_size, st.st_mtime_ns)
        return out


def _make_read_only(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o500 if p.is_dir() else 0o400)


def _make_writable(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o700 if p.is_dir() else 0o600)


@pytest.fixture(params=["no cache yet", "stale cache"])
def ro_home(request: pytest.FixtureRequest) -> Iterator[ReadOnlyHome]:
    base = Path(tempfile.mkdtemp(prefix="fleet-ro-"))
    home, worktree, scratch = base / "home", base / "wt", base / "scratch"
    worktree.mkdir()
    scratch.mkdir()
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=worktree, adapter="headless")
        fleet.register("w2", worktree=worktree)
        fleet.record("w1", HookEvent(ts=1.0, src="claude", hook="Stop",
                                     data={"last_assistant_message": "FLEET_WORKER_DONE: ok"}))
        fleet.status()
        fleet.record("w2", HookEvent(ts=2.0, src="claude", hook="UserPromptSubmit"))
    if request.param == "no cache yet":
        shutil.rmtree(cache_dir(home))
    assert cache_dir(home).exists() == (request.param == "stale cache")
    _make_read_only(home)
    yield ReadOnlyHome(path=home, worktree=worktree, scratch=scratch)
    _make_writable(home)
    shutil.rmtree(base, ignore_errors=True)


READ_ONLY_COMMANDS: Sequence[tuple[str, ...]] = (
    ("status",),
    ("status", "--json"),
    ("status", "w1", "w2", "--json"),
    ("log", "w1"),
    ("log", "w2", "--json"),
    ("wait", "--timeout", "0", "--json"),
    ("wait", "w1", "--json"),
    ("wait", "w2", "--timeout", "0"),
    ("watch", "--timeout", "0", "--json"),
    ("report",),
    ("report", "--json"),
    ("doctor", "--json"),
    ("workspace", "show", "w1", "--json"),
)


@pytest.mark.parametrize("argv", READ_ONLY_COMMANDS, ids=" ".join)
def test_read_only_commands_work_and_write_nothing(
    ro_home: ReadOnlyHome, argv: tuple[str, ...]
) -> None:
    before = ro_home.snapshot()
    done = ro_home.run(*argv)
    assert "Traceback" not in done.stderr
    expected = {"wait": {0 if "w1" in argv or "w2" not in argv else 3}, "doctor": {0, 1}}
    assert done.returncode in expected.get(argv[0], {0}), done.stderr
    if "--json" in argv:
        for line in done.stdout.splitlines() if argv[0] == "watch" else [done.stdout]:
            json.loads(line)
    assert ro_home.snapshot() == before


def test_a_hook_on_a_read_only_home_is_silent_and_status_says_why(
    ro_home: ReadOnlyHome,
) -> None:
    before = ro_home.snapshot()
    payload = json.dumps({"hook_event_name": "Stop", "last_assistant_message": "hi"})
    hook = ro_home.run(
        "--tool", "claude", env={"FLEET_WORKER": "w2"}, stdin=payload,
        program=hook_argv("claude", home=ro_home.path)[:-4],
    )
    assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
    assert ro_home.snapshot() == before  # nothing could be written: the event is lost
    status = ro_home.run("status")
    assert status.returncode == 0
    assert "note: " in status.stdout and "hook events cannot be recorded" in status.stdout
    status = ro_home.run("status", "--json")
    assert "fleet: note: " in status.stderr and "cannot be written" in status.stderr
    doctor = ro_home.run("doctor", "--json")
    problems = json.loads(doctor.stdout)["problems"]
    assert doctor.returncode == 1
    assert any("hook events cannot be recorded" in p for p in problems), problems


def test_the_home_really_is_read_only(ro_home: ReadOnlyHome) -> None:
    done = ro_home.run("seen", "w1@1")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    st = (ro_home.path / "workers" / "w1" / "journal.jsonl").stat()
    assert not st.st_mode & stat.S_IWUSR
