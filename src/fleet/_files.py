"""Writing files so that a reader (or a crash) never sees half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, content: bytes, mode: int = 0o600, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``content``: written to a temporary file in the same directory,
    given ``mode``, flushed to disk, then renamed over ``path``. On any failure the temporary
    file is removed and ``path`` is left as it was."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
