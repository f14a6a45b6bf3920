"""Writing files: only regular files are ever replaced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet._files import atomic_write


def test_replaces_a_regular_file_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    target.write_text("old")
    atomic_write(target, b"new", 0o600)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_never_renames_over_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    # /dev/null given as a settings file would otherwise be replaced by a regular file.
    target = tmp_path / "special"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(OSError, match="not a regular file"):
        atomic_write(target, b"x")
    assert (target.is_fifo() if kind == "fifo" else target.is_dir())
    assert [p.name for p in tmp_path.iterdir()] == ["special"]
