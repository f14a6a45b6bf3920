"""Names in the hub: host ids, host-qualified worker ids and marks, subjects and keys.

Pure: no I/O, no NATS. Host ids follow the rules of worker ids (lowercase letters, digits,
``.``, ``_``, ``-``; at most 64; starting with a letter or digit). A remote worker is
``<host>/<worker>`` and its marks are ``<host>/<worker>@<seq>``, ``...q`` (quiet) and ``...o``
(its host is offline). In subjects and key-value keys, where ``.`` separates tokens, a ``.``
of an id is written ``=`` (which no id contains), so every id maps to one token and back.
"""

from __future__ import annotations

import re
import socket
from typing import Final

import attrs

from fleet._core.ids import format_mark, is_worker_id
from fleet._errors import InvalidMark, InvalidWorkerId

#: Subject prefix of the journal stream: ``fleet.<host>.<worker>``.
PREFIX: Final = "fleet"
#: The stream that holds every shipped journal line.
STREAM: Final = "FLEET"
#: Key-value buckets: host heartbeats, and coordinators' seen marks.
HOSTS_BUCKET: Final = "fleet-hosts"
SEEN_BUCKET: Final = "fleet-seen"

_QUALIFIED_MARK = re.compile(
    r"(?P<host>[a-z0-9][a-z0-9._-]{0,63})/(?P<worker>[a-z0-9][a-z0-9._-]{0,63})"
    r"@(?P<seq>0|[1-9][0-9]*)(?P<kind>[qo]?)"
)


def validate_host_id(host: str) -> str:
    """Return ``host`` unchanged, or raise InvalidWorkerId with a one-line reason."""
    if not is_worker_id(host):
        raise InvalidWorkerId(
            f"invalid host id {host!r}: use 1-64 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return host


def default_host_id(hostname: str | None = None) -> str:
    """This machine's host id: its short host name, lowercased, other characters as ``-``."""
    name = (hostname if hostname is not None else socket.gethostname()).split(".")[0].lower()
    name = re.sub(r"[^a-z0-9._-]", "-", name).lstrip("._-")[:64]
    return name or "host"


def qualify(host: str, worker: str) -> str:
    return f"{host}/{worker}"


def is_qualified(worker: str) -> bool:
    return isinstance(worker, str) and "/" in worker


def split_worker(qualified: str) -> tuple[str, str]:
    """``host/worker`` as ``(host, worker)``; InvalidWorkerId for anything else."""
    host, sep, worker = qualified.partition("/") if isinstance(qualified, str) else ("", "", "")
    if not sep or not is_worker_id(host) or not is_worker_id(worker):
        raise InvalidWorkerId(
            f"invalid remote worker id {qualified!r}: expected HOST/WORKER, each 1-64 lowercase "
            "letters, digits, '.', '_' or '-'"
        )
    return host, worker


@attrs.frozen(kw_only=True)
class HubMark:
    """A host-qualified mark. ``kind`` is ``""``, ``"q"`` (quiet) or ``"o"`` (host offline)."""

    host: str
    worker: str
    seq: int
    kind: str = ""

    @property
    def qualified_worker(self) -> str:
        return qualify(self.host, self.worker)

    @property
    def local(self) -> str:
        """The mark as the worker's own host writes it (``worker@seq``, ``worker@seqq``)."""
        return f"{self.worker}@{self.seq}{self.kind}"

    def __str__(self) -> str:
        return f"{self.host}/{self.worker}@{self.seq}{self.kind}"


def parse_hub_mark(text: str) -> HubMark:
    m = _QUALIFIED_MARK.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise InvalidMark(
            f"invalid seen mark {text!r}: expected HOST/WORKER@SEQ, HOST/WORKER@SEQq or "
            "HOST/WORKER@SEQo"
        )
    return HubMark(host=m["host"], worker=m["worker"], seq=int(m["seq"]), kind=m["kind"])


def offline_mark(host: str, worker: str, seq: int) -> str:
    """The mark of a worker whose host went offline after its line ``seq``."""
    return f"{format_mark(qualify(host, worker), seq)}o"


def token(ident: str) -> str:
    """An id as one subject or key token (``.`` written ``=``)."""
    return ident.replace(".", "=")


def untoken(tok: str) -> str:
    return tok.replace("=", ".")


def journal_subject(host: str, worker: str, prefix: str = PREFIX) -> str:
    return f"{prefix}.{token(host)}.{token(worker)}"


def worker_of_subject(subject: str) -> tuple[str, str] | None:
    """``(host, worker)`` of a journal subject, or None for any other subject."""
    parts = subject.split(".")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        return None
    return untoken(parts[1]), untoken(parts[2])


def line_header(gen: int, seq: int, offset: int, end: int, digest: str) -> str:
    """The ``Fleet-Line`` header of a shipped line: its generation, seq, byte range in the
    journal and a digest of it. One header, because every header costs each reader time."""
    return f"{gen} {seq} {offset} {end} {digest}"


def parse_line_header(value: str) -> tuple[int, int, int, int, str]:
    """ValueError for anything :func:`line_header` did not write."""
    gen, seq, offset, end, digest = value.split(" ")
    out = int(gen), int(seq), int(offset), int(end), digest
    if min(out[:4]) < 0 or out[3] <= out[2]:
        raise ValueError("not a line header")
    return out


def journal_filter(prefix: str = PREFIX) -> str:
    return f"{prefix}.*.*"


def rpc_subject(host: str, coordinator: str, prefix: str = PREFIX) -> str:
    """Where ``coordinator`` asks ``host``'s ``fleet ship`` for a remote action. Four tokens,
    so the journal stream (``fleet.*.*``) never captures a request; the last names who asks,
    and the server lets each coordinator publish only under its own name."""
    return f"{prefix}.rpc.{token(host)}.{token(coordinator)}"


def rpc_filter(host: str, prefix: str = PREFIX) -> str:
    return f"{prefix}.rpc.{token(host)}.*"


def coordinator_of_rpc(subject: str) -> str | None:
    parts = subject.split(".")
    return untoken(parts[3]) if len(parts) == 4 and parts[3] else None


def msg_id(host: str, worker: str, gen: int, offset: int) -> str:
    """The JetStream de-duplication id of the line at byte ``offset``. A journal that was
    replaced is shipped again as a new generation, whose ids differ from the old one's."""
    if gen == 0:
        return f"{host}/{worker}/{offset}"
    return f"{host}/{worker}/g{gen}/{offset}"


def reset_msg_id(host: str, worker: str, gen: int) -> str:
    return f"{host}/{worker}/g{gen}/reset"


def seen_key(coordinator: str, mark: HubMark) -> str:
    """The seen-bucket key of one mark: ``<coordinator>.<host>.<worker>.<seq><kind>``."""
    return f"{token(coordinator)}.{token(mark.host)}.{token(mark.worker)}.{mark.seq}{mark.kind}"


def seen_prefix(coordinator: str) -> str:
    return f"{token(coordinator)}."
