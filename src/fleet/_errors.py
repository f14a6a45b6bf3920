"""Errors raised by fleet. Each also subclasses the builtin it resembles, so callers can catch
either the fleet error or the familiar builtin."""

from __future__ import annotations


class FleetError(Exception):
    """Base class of every error fleet raises on purpose."""


class InvalidWorkerId(FleetError, ValueError):
    """A worker id that is not lowercase letters, digits, '.', '_', '-' (1-64, starting with a
    letter or digit)."""


class InvalidMark(FleetError, ValueError):
    """A seen mark that is not '<worker>@<seq>' or '<worker>@<seq>q'."""


class UnknownWorker(FleetError, LookupError):
    """No journal exists for this worker."""


class JournalGone(UnknownWorker):
    """A worker's journal disappeared (deleted, moved away) while fleet was following it."""


class NoWorkers(FleetError, LookupError):
    """Nothing to wait for: no worker that is not retired, and the caller did not ask to wait
    for new ones."""


class JournalError(FleetError, OSError):
    """A journal could not be written or read."""

    def __str__(self) -> str:
        # The message alone: OSError would put "[Errno 28]" before it.
        return self.strerror if isinstance(self.strerror, str) else super().__str__()


class SettingsError(FleetError, ValueError):
    """A settings, profiles or config file that cannot be used as it is."""


class MissingInput(SettingsError, FileNotFoundError):
    """A file fleet was pointed at (a brief, a follow-up, a task list) does not exist."""


class ToolError(FleetError, RuntimeError):
    """An outside tool (git, clausona, superset, herdr, an agent CLI) failed."""


class Refused(FleetError, PermissionError):
    """fleet refused to act because it could not prove the action is safe."""


def one_line(exc: BaseException, *, limit: int | None = None) -> str:
    """An exception as one line for a message: its text with every run of whitespace (newlines
    too) made one space, or its type's name when it has no text; cut to ``limit`` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if limit is None else text[:limit]
