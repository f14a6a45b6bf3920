"""A brief that cannot be launched fails before anything is created; a run that cannot start
(or a supervisor that fails) leaves the worker in an attention state, never `starting`; a
failed registration leaves no phantom worker."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleet import Fleet, SettingsError
from fleet._cli import main
from fleet._orchestrate import start_worker
from fleet._supervisor import RunSpec, Supervisor, dump_spec
from tests.conftest import Repo

from .conftest import FakeAgent


def _write(data: bytes) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        path.write_bytes(data)
        return path

    return make


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def _loop(path: Path) -> Path:
    path.symlink_to(path)
    return path


BRIEFS: dict[str, Callable[[Path], Path]] = {
    "nul byte": _write(b"# Fix it\nthe \x00 test\n"),
    "too long for argv": _write(b"# Big\n" + b"x" * 200_000),
    "not utf-8": _write(b"# caf\xe9\n"),
    "empty": _write(b" \n\n"),
    "fifo": _fifo,
    "directory": _dir,
    "symlink loop": _loop,
    "dev zero": lambda _: Path("/dev/zero"),
    "missing": lambda path: path,
}


def _nothing_made(home: Path, repo: Repo) -> None:
    assert not (home / "workers").exists() or not any((home / "workers").iterdir())
    assert not (repo.path.parent / "repo.fleet").exists()
    assert "fleet/" not in repo.git("branch", "--list")


@contextlib.contextmanager
def memory_cap(extra: int = 1 << 30) -> Iterator[None]:
    """Cap this process's address space at what it uses now plus ``extra`` for the block: a
    regression that reads /dev/zero to the end fails with MemoryError instead of taking the
    machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = next(int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text()
                .splitlines() if line.startswith("VmSize:"))
    cap = used + extra if hard == resource.RLIM_INFINITY else min(hard, used + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BRIEFS))
def test_a_brief_no_agent_could_be_given_is_refused_before_anything_is_made(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, kind: str
) -> None:
    brief = BRIEFS[kind](tmp_path / "brief.md")
    with pytest.raises(SettingsError) as info, memory_cap():
        start_worker("w1", task=brief, repo=repo.path, options=fake.options())
    assert "\n" not in str(info.value) and str(brief) in str(info.value)
    _nothing_made(home, repo)
    assert fake.calls() == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["nul byte", "fifo", "dev zero", "too long for argv"])
def test_fleet_run_refuses_such_a_brief_too(
    home: Path, repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, kind: str,
) -> None:
    monkeypatch.setenv("FLEET_TEST_KEY", "k" * 20)
    brief = BRIEFS[kind](tmp_path / "brief.md")
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(f'[[task]]\nname = "t1"\nbrief = "{brief}"\n')
    with memory_cap():
        code = main(["run", str(tasks), "--repo", str(repo.path), "--endpoint",
                     "http://127.0.0.1:9", "--key-from", "env:FLEET_TEST_KEY"])
    _, err = capsys.readouterr()
    assert code == 1 and err.count("\n") == 1 and str(brief) in err
    _nothing_made(home, repo)


def test_a_nul_byte_in_an_option_is_refused_before_anything_is_made(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    brief = tmp_path / "brief.md"
    brief.write_text("# ok\n")
    with pytest.raises(SettingsError, match="model contains a NUL byte"):
        start_worker("w1", task=brief, repo=repo.path, model="opus\x00", options=fake.options())
    _nothing_made(home, repo)


def _spec(home: Path, tmp_path: Path, **kw: object) -> RunSpec:
    base: dict[str, object] = {
        "worker": "w1", "home": str(home), "tool": "claude", "run": 1, "cwd": str(tmp_path),
        "argv": ("/bin/true",), "output_dir": str(home / "workers" / "w1" / "headless"),
    }
    base.update(kw)
    return RunSpec(**base)  # type: ignore[arg-type]


def _register(home: Path, tmp_path: Path) -> None:
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path, adapter="headless")


def test_a_run_that_cannot_be_started_needs_attention(home: Path, tmp_path: Path) -> None:
    """An argument no process can take (a NUL byte: Popen raises ValueError, not OSError) used
    to crash the supervisor and leave the worker `starting` for good."""
    _register(home, tmp_path)
    sup = Supervisor(_spec(home, tmp_path, argv=("/bin/echo", "a\x00b")))
    try:
        done = sup.run()
    finally:
        sup.close()
    assert (done.reason, done.exit_code) == ("error", 127)
    state = Fleet(home).state("w1")
    assert state.state == "gone" and state.needs_attention


def test_a_supervisor_that_fails_journals_the_end(home: Path, tmp_path: Path) -> None:
    """Whatever breaks inside the supervisor (here: its output directory cannot be made), the
    worker ends in an attention state, with the reason in its result."""
    _register(home, tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    spec_file = tmp_path / "run.json"
    spec_file.write_bytes(dump_spec(_spec(home, tmp_path, output_dir=str(blocker / "out"))))
    done = subprocess.run(
        [sys.executable, "-m", "fleet._supervisor", "--spec", str(spec_file)],
        input=b'{"key": null}\n', capture_output=True, timeout=60, check=False,
        env={**os.environ, "FLEET_HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr and b"supervisor: failed: " in done.stderr
    state = Fleet(home).state("w1")
    assert state.state == "gone" and state.needs_attention
    assert state.exit is not None and "the supervisor failed" in (state.exit.result or "")


def _no_worker(home: Path) -> None:
    assert not (home / "workers" / "w1").exists()
    index = home / "worktrees.tsv"
    assert not index.exists() or b"\tw1\n" not in index.read_bytes()


def test_a_worktree_path_the_index_cannot_hold_is_refused_first(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = tmp_path / "two\nlines"
    odd.mkdir()
    with pytest.raises(SettingsError, match="line break"), Fleet(home) as fleet:
        fleet.register("w1", worktree=odd)
    _no_worker(home)
    assert main(["register", "w1", "--worktree", str(odd)]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    _no_worker(home)


def test_a_registration_that_fails_half_way_takes_itself_back(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet import _journal

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_journal, "index_worktree", full_disk)
    with pytest.raises(OSError), Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
    _no_worker(home)
    assert Fleet(home).workers() == []


def test_a_failed_re_registration_keeps_the_worker(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet import _journal

    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
    before = (home / "workers" / "w1" / "journal.jsonl").read_bytes()

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_journal, "index_worktree", full_disk)
    with pytest.raises(OSError), Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
    assert (home / "workers" / "w1" / "journal.jsonl").read_bytes().startswith(before)
    assert json.loads(before.splitlines()[0])["type"] == "registered"
