"""Worker ids and seen marks."""

from __future__ import annotations

import re

import attrs

from fleet._errors import InvalidMark, InvalidWorkerId

_WORKER_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
#: A seq has at most 19 digits (2**63 lines would not fit on any disk), so converting one can
#: never hit Python's limit on the digits of an int.
_MARK = re.compile(
    r"(?P<worker>[a-z0-9][a-z0-9._-]{0,63})@(?P<seq>0|[1-9][0-9]{0,18})(?P<quiet>q?)"
)


def _shown(text: object) -> str:
    """``text`` as an error message quotes it: its repr, cut to a readable length."""
    shown = repr(text)
    return shown if len(shown) <= 100 else shown[:96] + "…" + shown[-3:]


def validate_worker_id(worker: str) -> str:
    """Return ``worker`` unchanged, or raise InvalidWorkerId with a one-line reason.

    Ids become directory names, so anything that could step outside FLEET_HOME is refused."""
    if not isinstance(worker, str) or _WORKER_ID.fullmatch(worker) is None:
        raise InvalidWorkerId(
            f"invalid worker id {_shown(worker)}: use 1-64 lowercase letters, digits, '.', '_' "
            "or '-', starting with a letter or digit"
        )
    return worker


def is_worker_id(worker: str) -> bool:
    return isinstance(worker, str) and _WORKER_ID.fullmatch(worker) is not None


@attrs.frozen(kw_only=True)
class Mark:
    """A state's seen mark: the worker and the seq of the event that entered the state; quiet
    marks carry the seq of the last activity and a trailing 'q'."""

    worker: str
    seq: int
    quiet: bool = False

    def __str__(self) -> str:
        return f"{self.worker}@{self.seq}{'q' if self.quiet else ''}"


def parse_mark(text: str) -> Mark:
    m = _MARK.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise InvalidMark(f"invalid seen mark {_shown(text)}: expected WORKER@SEQ or WORKER@SEQq")
    return Mark(worker=m["worker"], seq=int(m["seq"]), quiet=bool(m["quiet"]))


def format_mark(worker: str, seq: int, *, quiet: bool = False) -> str:
    return f"{worker}@{seq}{'q' if quiet else ''}"
