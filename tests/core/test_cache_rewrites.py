"""The fold cache never trusts a journal that was rewritten in place: same inode, as long or
longer, other bytes before the cached offset. It notices, replays, and a warm read equals a
cold one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet import Fleet, HookEvent
from fleet._core.events import encode_line
from fleet._fold_cache import FoldCache, load_states
from fleet._home import journal_path
from fleet.testing import MockClock

NOW = 10_000.0


def _journal(home: Path, tmp_path: Path, events: int) -> Path:
    with Fleet(clock=MockClock(now=50.0)) as fleet:
        fleet.register("w1", worktree=tmp_path)
        for n in range(events):
            hook = "Stop" if n % 2 else "UserPromptSubmit"
            data = {"last_assistant_message": f"turn {n:04d}"} if hook == "Stop" else {}
            fleet.record("w1", HookEvent(ts=100.0 + n, src="claude", hook=hook, data=data))
    return journal_path(home, "w1")


def _rewrite_in_place(path: Path, content: bytes) -> None:
    """New content through the same inode (no rename, no new file), like `>` in a shell or
    an editor that writes back where it read."""
    ino = path.stat().st_ino
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, content, 0)
    finally:
        os.close(fd)
    assert path.stat().st_ino == ino


def _blocked(path: Path) -> bytes:
    """The journal's last event turned into a permission request, padded to be no shorter."""
    lines = path.read_bytes().splitlines(keepends=True)
    event = HookEvent(ts=900.0, src="claude", hook="PermissionRequest", data={"tool_name": "Bash"})
    line = encode_line(event)
    if len(line) < len(lines[-1]):
        event = HookEvent(ts=900.0, src="claude", hook="PermissionRequest",
                          data={"tool_name": "B" * (len(lines[-1]) - len(line) + 4)})
        line = encode_line(event)
    return b"".join(lines[:-1]) + line


def _edit_head(path: Path) -> bytes:
    """The registration names another branch: same length, first line only."""
    data = path.read_bytes()
    first = data.index(b"\n")
    return data[:first].replace(b'"type":"registered"', b'"type":"registeree"') + data[first:]


def _other_history_longer(path: Path) -> bytes:
    """Different events altogether, more bytes than before."""
    count = len(path.read_bytes().splitlines()) + 200
    events = [
        HookEvent(ts=500.0 + n, src="claude", hook="PermissionRequest", data={"tool_name": "Bash"})
        for n in range(count)
    ]
    return path.read_bytes().split(b"\n", 1)[0] + b"\n" + b"".join(map(encode_line, events))


def _same_bytes_plus_a_line_removed_early(path: Path) -> bytes:
    """A line from early on removed and one appended, so the size stays close."""
    lines = path.read_bytes().splitlines(keepends=True)
    return b"".join(lines[:2] + lines[3:]) + lines[-1]


REWRITES: dict[str, Callable[[Path], bytes]] = {
    "last event changed": _blocked,
    "registration changed": _edit_head,
    "other history, longer": _other_history_longer,
    "a line removed early": _same_bytes_plus_a_line_removed_early,
}


@pytest.mark.parametrize("events", [3, 400], ids=["small", "large"])
@pytest.mark.parametrize("name", sorted(REWRITES))
def test_a_journal_rewritten_in_place_is_replayed(
    home: Path, tmp_path: Path, name: str, events: int
) -> None:
    path = _journal(home, tmp_path, events)
    first = load_states(home, None, NOW, use_cache=True)
    assert FoldCache(home).load()["w1"]["offset"] == path.stat().st_size
    new = REWRITES[name](path)
    assert len(new) >= path.stat().st_size or name == "a line removed early"
    _rewrite_in_place(path, new)
    warm = load_states(home, None, NOW, use_cache=True)
    cold = load_states(home, None, NOW, use_cache=False)
    assert warm == cold
    assert warm != first
    # And the refreshed cache is right too.
    assert load_states(home, None, NOW, use_cache=True) == cold


def test_an_untouched_journal_is_continued_not_replayed(home: Path, tmp_path: Path) -> None:
    """The fingerprint costs a check, not a replay: appends continue from the offset."""
    path = _journal(home, tmp_path, 400)
    load_states(home, None, NOW, use_cache=True)
    size = path.stat().st_size
    with Fleet(clock=MockClock(now=60.0)) as fleet:
        fleet.record("w1", HookEvent(ts=900.0, src="claude", hook="UserPromptSubmit"))
    from fleet._fold_cache import load_folded

    folded = load_folded(home)["w1"]
    assert not folded.reader.reset and folded.reader.offset > size
    assert load_states(home, None, NOW, use_cache=True) == load_states(
        home, None, NOW, use_cache=False
    )
