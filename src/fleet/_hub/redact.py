"""What leaves a host: journal lines only, bounded, with credential shapes redacted.

The journal never holds keys (the hook keeps a bounded set of fields; headless workers' keys go
only to the agent's environment). Shipping still redacts what looks like a credential on the way
out, in case a user's message or a tool error quoted one: known key formats (Anthropic, OpenAI,
GitHub, Slack, AWS, Google, JWTs, NATS seeds, private key blocks), bearer tokens, passwords in
URLs and ``name=value`` pairs, and the values of JSON fields whose names say they are secret.

Pure: no I/O. A line with nothing to redact is returned as it is, byte for byte, so the hub
folds exactly what the host folds.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

REDACTED: Final = "[redacted]"
#: A shipped line is at most this long. fleet's own writers stay far below it (the hook keeps a
#: few KiB per event); a longer line is shipped as a marker that folds as unreadable.
MAX_LINE: Final = 256 * 1024

_SHAPES: Final = re.compile(
    rb"sk-ant-[A-Za-z0-9_-]{16,}"
    rb"|sk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,}"
    rb"|gh[pousr]_[A-Za-z0-9]{30,}"
    rb"|github_pat_[A-Za-z0-9_]{40,}"
    rb"|glpat-[A-Za-z0-9_-]{20,}"
    rb"|xox[abposr]-[A-Za-z0-9-]{10,}"
    rb"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"
    rb"|AIza[0-9A-Za-z_-]{35}"
    rb"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    rb"|\bS[UOACNPX][A-Z2-7]{56}\b"
    rb"|-----BEGIN [A-Z ]*PRIVATE KEY-----[^\"]*?-----END [A-Z ]*PRIVATE KEY-----"
)
_BEARER: Final = re.compile(rb"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{12,}")
_URL_PASSWORD: Final = re.compile(rb"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@\"\\]+:)[^/\s@\"\\]+@")
_ASSIGNMENT: Final = re.compile(
    rb"(?i)\b((?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|secret[_-]?key|client[_-]?"
    rb"secret|password|passwd|token|secret)\s*[=:]\s*)(?!\[redacted\])[^\s\"\\',;&]{6,}"
)
#: JSON field names whose string values are secrets, wherever they appear in a line.
_SECRET_NAME: Final = re.compile(
    r"(?i)^(?:.*[_-])?(?:api[_-]?key|apikey|token|access[_-]?token|refresh[_-]?token|auth[_-]?"
    r"token|secret|client[_-]?secret|password|passwd|authorization|private[_-]?key|credentials?)$"
)
_NAME_HINT: Final = re.compile(
    rb"(?i)(?:key|token|secret|password|passwd|authorization|credential)\"\s*:\s*\""
)


def redact_text(data: bytes) -> bytes:
    """``data`` with every credential shape replaced by ``[redacted]``. The patterns never span
    a quote or a backslash, so a JSON line stays valid JSON."""
    out = _SHAPES.sub(REDACTED.encode(), data)
    out = _BEARER.sub(rb"\1\2" + REDACTED.encode(), out)
    out = _URL_PASSWORD.sub(rb"\1" + REDACTED.encode() + b"@", out)
    return _ASSIGNMENT.sub(rb"\1" + REDACTED.encode(), out)


def _scrub(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for k, v in value.items():
            if isinstance(v, str) and v and v != REDACTED and _SECRET_NAME.match(str(k)):
                out[k], changed = REDACTED, True
            else:
                out[k], c = _scrub(v)
                changed = changed or c
        return out, changed
    if isinstance(value, list):
        items = [_scrub(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def redact_line(line: bytes) -> bytes:
    """One journal line (without its newline) as it may leave the host."""
    if len(line) > MAX_LINE:
        return b"fleet: line of %d bytes not shipped (over %d)" % (len(line), MAX_LINE)
    out = redact_text(line)
    if _NAME_HINT.search(out):
        try:
            obj = orjson.loads(out)
        except orjson.JSONDecodeError:
            return out
        scrubbed, changed = _scrub(obj)
        if changed:
            return orjson.dumps(scrubbed)
    return out
