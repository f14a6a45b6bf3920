"""Journals under hostile conditions: writers killed mid-write, crashes that leave a torn line,
short writes on a full disk. Every append starts on a line boundary, so a torn tail never
swallows the next good event; both writers (fleet's ``append_line`` and the hook program's) are
held to it."""

from __future__ import annotations

import functools
import importlib.util
import multiprocessing
import os
import random
import resource
import signal
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from fleet._core.events import Seen, Unreadable, encode_line
from fleet._errors import JournalError
from fleet._hook_command import hook_script_path
from fleet._journal import JournalReader, append_line

Append = Callable[[Path, bytes], None]


@functools.cache
def _hook_impl() -> ModuleType:
    path = hook_script_path().parent / "fleet_hook_impl.py"
    spec = importlib.util.spec_from_file_location("fleet_hook_impl_torn", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hook_append(path: Path, line: bytes) -> None:
    _hook_impl().append_line(str(path), line)


WRITERS: dict[str, Append] = {"fleet": append_line, "hook": _hook_append}


def _line(src: str, i: int, pad: int = 0) -> bytes:
    line = encode_line(Seen(ts=float(i), src=src, mark=f"w@{i}"))
    if pad:
        line = line[:-2] + f',"pad":"{"x" * pad}"}}\n'.encode()
    return line


def _events(path: Path) -> list[object]:
    return [event for _, event in JournalReader(path).read()]


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_an_append_after_a_torn_tail_starts_a_new_line(tmp_path: Path, writer: str) -> None:
    path = tmp_path / "journal.jsonl"
    first, second = _line("a", 0), _line("a", 1)
    path.write_bytes(first + second[:17])  # a writer died 17 bytes into its line
    WRITERS[writer](path, _line("a", 2))
    events = _events(path)
    assert [type(e).__name__ for e in events] == ["Seen", "Unreadable", "Seen"]
    assert isinstance(events[2], Seen) and events[2].mark == "w@2"
    # A file that already ends a line gets no blank line.
    WRITERS[writer](path, _line("a", 3))
    assert path.read_bytes().endswith(b"\n" + _line("a", 2) + _line("a", 3))


# -- many writers, killed mid-write ------------------------------------------------------------


def _good_writer(path: str, acks: str, src: str, kind: str, count: int, seed: int) -> None:
    """Appends ``count`` events, acknowledging each one after its append returned."""
    append = WRITERS[kind]
    rng = random.Random(seed)
    ack = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    for i in range(count):
        append(Path(path), _line(src, i, rng.choice([0, 0, 100, 3000, 20000])))
        os.write(ack, f"{src} {i}\n".encode())


def _tearing_writer(path: str, seed: int) -> None:
    """A writer that dies in the middle of its line (under the lock, as a real one would)."""
    import fcntl

    rng = random.Random(seed)
    line = _line("torn", seed, rng.randrange(0, 9000))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, line[: rng.randrange(1, len(line) - 1)])
    os.kill(os.getpid(), signal.SIGKILL)


def test_writers_killed_mid_write_never_swallow_a_good_event(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    acks = tmp_path / "acks"
    ctx = multiprocessing.get_context("fork")
    rng = random.Random(1234)
    good: list[multiprocessing.process.BaseProcess] = []
    killed = tears = 0
    for n in range(8):
        kind = "fleet" if n % 2 else "hook"
        p = ctx.Process(target=_good_writer, args=(str(path), str(acks), f"p{n}", kind, 200, n))
        p.start()
        good.append(p)
    for round_ in range(24):
        tearer = ctx.Process(target=_tearing_writer, args=(str(path), round_))
        tearer.start()
        tearer.join(60)
        assert tearer.exitcode == -signal.SIGKILL
        tears += 1
        if round_ % 3 == 0:  # SIGKILL a good writer wherever it is, and start another
            victim = rng.choice([p for p in good if p.is_alive()] or good)
            if victim.is_alive():
                os.kill(victim.pid or 0, signal.SIGKILL)
                killed += 1
            n = len(good)
            kind = "fleet" if n % 2 else "hook"
            p = ctx.Process(
                target=_good_writer, args=(str(path), str(acks), f"p{n}", kind, 100, n)
            )
            p.start()
            good.append(p)
    for p in good:
        p.join(120)
        assert p.exitcode in (0, -signal.SIGKILL)
    events = _events(path)
    acked = {tuple(line.split()) for line in acks.read_text().splitlines()}
    found = [(e.src, e.mark.removeprefix("w@")) for e in events if isinstance(e, Seen)]
    assert len(found) == len(set(found)), "an event was journaled twice"
    lost = acked - set(found)
    assert not lost, f"{len(lost)} acknowledged events lost, e.g. {sorted(lost)[:3]}"
    unreadable = [e for e in events if isinstance(e, Unreadable)]
    # Each torn fragment is one unreadable line of its own; nothing else is unreadable.
    assert 0 < len(unreadable) <= tears + killed
    assert len(acked) > 500


# -- short writes (a full disk, a file size limit) ---------------------------------------------


def _append_under_limit(path: str, line: bytes, limit: int, kind: str) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        WRITERS[kind](Path(path), line)
    except JournalError:
        os._exit(3)
    except Exception as exc:
        os._exit(4 if type(exc).__name__ == "HookFailure" else 5)
    os._exit(0)


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("torn", [False, True], ids=["whole", "torn-tail"])
def test_a_short_write_leaves_no_torn_line(tmp_path: Path, writer: str, torn: bool) -> None:
    """RLIMIT_FSIZE makes write(2) stop at the limit, as a disk that fills up mid-write does
    (Python ignores SIGXFSZ, so the write returns short, then fails with EFBIG)."""
    path = tmp_path / "journal.jsonl"
    before = _line("a", 0) + (_line("a", 1)[:9] if torn else b"")
    path.write_bytes(before)
    ctx = multiprocessing.get_context("fork")
    for room in (1, 10, 0):
        p = ctx.Process(
            target=_append_under_limit,
            args=(str(path), _line("a", 2, 3000), len(before) + room, writer),
        )
        p.start()
        p.join(60)
        assert p.exitcode == (3 if writer == "fleet" else 4)
        assert path.read_bytes() == before, "a short write left bytes behind"
    WRITERS[writer](path, _line("a", 3))
    events = _events(path)
    assert isinstance(events[-1], Seen) and events[-1].mark == "w@3"
    assert len(events) == (3 if torn else 2)
