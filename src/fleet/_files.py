"""Reading the files fleet is pointed at, and writing files so that a reader (or a crash) never
sees half of one."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

from fleet._errors import MissingInput, SettingsError

#: What fleet reads from a file it is pointed at (a brief, a task list, settings, a config
#: file) is small; anything larger is refused rather than read into memory.
INPUT_LIMIT: Final = 16 << 20


def atomic_write(path: Path, content: bytes, mode: int = 0o600, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``content``: written to a temporary file in the same directory,
    given ``mode``, flushed to disk, then renamed over ``path``. On any failure the temporary
    file is removed and ``path`` is left as it was. Only a regular file (or nothing) is ever
    replaced: renaming over a device, a FIFO or a socket (``--settings /dev/null``) would put
    a file where the system expects the device."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise OSError(errno.EINVAL, "not a regular file, so fleet does not replace it", path)
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


def read_input(
    path: str | os.PathLike[str], what: str, *, limit: int = INPUT_LIMIT, missing_ok: bool = False
) -> bytes | None:
    """The bytes of a file fleet was pointed at (``what`` names it in errors: "brief",
    "settings file"), or None when it does not exist and ``missing_ok``.

    Anything but a regular file of at most ``limit`` bytes is refused with a one-line
    SettingsError, before reading: a directory, a FIFO (opened without blocking, so one with no
    writer cannot hang the command), a device that never ends (``/dev/zero``), a symlink loop."""
    where = f"{what} {os.fspath(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise MissingInput(f"{where} does not exist") from None
    except OSError as exc:
        raise SettingsError(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise SettingsError(f"{where} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise SettingsError(f"{where} is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SettingsError(f"cannot read {where}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise SettingsError(f"{where} is larger than {limit} bytes")
    return b"".join(chunks)


def read_text_input(
    path: str | os.PathLike[str], what: str, *, limit: int = INPUT_LIMIT
) -> str:
    """:func:`read_input` decoded as UTF-8 (a one-line SettingsError naming the first bad byte
    otherwise)."""
    data = read_input(path, what, limit=limit)
    assert data is not None
    return decode_utf8(data, f"{what} {os.fspath(path)}")


#: The most text a brief or follow-up may hold: it reaches a headless agent as one argument,
#: and Linux takes at most 128 KiB in one (MAX_ARG_STRLEN, its NUL included).
PROMPT_LIMIT: Final = 128 * 1024 - 2


def read_prompt(path: str | os.PathLike[str], what: str) -> str:
    """The text of a brief or follow-up (``what``), checked before anything is created or
    sent: a regular file, UTF-8, not empty, no NUL byte (no process can be given one in an
    argument, and a terminal would take it as something else), at most PROMPT_LIMIT bytes."""
    where = f"{what} {os.fspath(path)}"
    data = read_input(path, what, limit=1 << 20, missing_ok=True)
    if data is None:
        raise MissingInput(f"cannot read {where}: it does not exist")
    if len(data) > PROMPT_LIMIT:
        raise SettingsError(
            f"{where} is {len(data)} bytes: at most {PROMPT_LIMIT} can be passed to an agent"
        )
    text = decode_utf8(data, where)
    if "\x00" in text:
        raise SettingsError(
            f"{where} contains a NUL byte (at byte {data.index(0)}): no agent can be given it"
        )
    if not text.strip():
        raise SettingsError(f"{where} is empty")
    return text


def decode_utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{where} is not UTF-8 text (byte {exc.start})") from None
