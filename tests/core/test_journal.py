from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet import InvalidWorkerId, Seen, Unreadable
from fleet._core.events import encode_line
from fleet._home import journal_path
from fleet._journal import JournalReader, append, append_line, list_workers, read_events

from .strategies import journals


def test_layout_and_permissions(home: Path) -> None:
    append(home, "w1", Seen(ts=1.0, mark="w1@0"))
    path = journal_path(home, "w1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert list_workers(home) == ["w1"]


def test_bad_worker_id_is_refused_before_touching_disk(home: Path) -> None:
    with pytest.raises(InvalidWorkerId):
        append(home, "../escape", Seen(ts=1.0, mark="w1@0"))
    assert not home.exists() or not any(home.rglob("*journal*"))


def test_only_whole_lines_are_appended(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        append_line(tmp_path / "j", b"no newline")
    with pytest.raises(ValueError):
        append_line(tmp_path / "j", b"two\nlines\n")


def _writer(path: str, worker_index: int, count: int) -> None:
    for i in range(count):
        # lines of different sizes, some larger than a pipe buffer, to catch interleaving
        pad = "x" * ((i * 37 + worker_index * 11) % 9000)
        line = encode_line(Seen(ts=float(i), src=f"p{worker_index}", mark=f"w@{i}"))
        line = line[:-2] + f',"pad":"{pad}"}}\n'.encode()
        append_line(Path(path), line)


def test_concurrent_appenders_lose_and_tear_nothing(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    procs, count = 8, 150
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_writer, args=(str(path), n, count)) for n in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    events = [e for _, e in JournalReader(path).read()]
    assert len(events) == procs * count
    assert not any(isinstance(e, Unreadable) for e in events)
    seen = {(e.src, e.mark) for e in events if isinstance(e, Seen)}
    assert len(seen) == procs * count


def test_torn_last_line_is_held_back_and_garbage_does_not_hide_later_lines(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    good = [encode_line(Seen(ts=float(i), mark=f"w@{i}")) for i in range(4)]
    path.write_bytes(
        good[0] + b"garbage\n" + b"\xff\xfe\n" + good[1] + b'{"v":1,"ts"\n' + good[2] + good[3][:10]
    )
    reader = JournalReader(path)
    events = reader.read()
    kinds = [type(e).__name__ for _, e in events]
    assert kinds == ["Seen", "Unreadable", "Unreadable", "Seen", "Unreadable", "Seen"]
    assert [seq for seq, _ in events] == list(range(6))
    # the torn tail is not consumed until its newline arrives
    assert reader.read() == []
    with path.open("ab") as f:
        f.write(good[3][10:])
    ((seq, event),) = reader.read()
    assert seq == 6 and isinstance(event, Seen) and event.mark == "w@3"


def test_reader_restarts_when_the_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(encode_line(Seen(ts=1.0, mark="w@0")) * 3)
    reader = JournalReader(path)
    assert len(reader.read()) == 3
    path.unlink()
    path.write_bytes(encode_line(Seen(ts=1.0, mark="w@0")))
    out = reader.read()
    assert reader.reset and [s for s, _ in out] == [0]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(journals(), st.data())
def test_any_chunking_gives_the_same_events(
    tmp_path: Path, events: list, data: st.DataObject
) -> None:  # type: ignore[type-arg]
    blob = b"".join(encode_line(e) for e in events) + b"junk\n"
    path = tmp_path / f"j{os.getpid()}-{data.draw(st.integers(0, 10**9))}.jsonl"
    path.write_bytes(b"")
    reader = JournalReader(path)
    got = []
    pos = 0
    while pos < len(blob):
        n = data.draw(st.integers(1, 200))
        with path.open("ab") as f:
            f.write(blob[pos : pos + n])
        pos += n
        got.extend(reader.read())
    whole = JournalReader(path).read()
    assert got == whole
    assert [e for _, e in whole][: len(events)] == events


def test_read_events_of_unknown_worker(home: Path) -> None:
    from fleet import UnknownWorker

    with pytest.raises(UnknownWorker):
        read_events(home, "nobody")
