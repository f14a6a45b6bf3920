"""Writing files so that a reader (or a crash) never sees half of one."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from fleet._errors import SettingsError


def atomic_write(path: Path, content: bytes, mode: int = 0o600, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``content``: written to a temporary file in the same directory,
    given ``mode``, flushed to disk, then renamed over ``path``. On any failure the temporary
    file is removed and ``path`` is left as it was. Only a regular file (or nothing) is ever
    replaced: renaming over ``/dev/null``, a FIFO or a socket would destroy it, so such a path
    is refused with :class:`~fleet._errors.SettingsError`."""
    refuse_unless_regular(path)
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


def refuse_unless_regular(path: Path) -> None:
    """Refuse a path that exists and is not a regular file (a symlink counts as what it
    replaces: itself)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SettingsError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise SettingsError(f"{path} is {kind}; fleet writes only regular files there")
