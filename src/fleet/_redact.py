"""Taking a worker's key out of whatever fleet writes or prints, by value.

A key reaches the agent's environment and nothing else; but the agent itself may print it (a
model that echoes its environment, a failing request that shows its headers), and what the
agent prints becomes results, journal fields and output files. Whoever knows the key (the
supervisor) replaces every occurrence with :data:`MASK` before writing any of it. Values shorter
than :data:`MIN_SECRET` are left alone: no real key is that short, and replacing such a value
everywhere would garble text without protecting anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, TypeVar

import attrs

MASK: Final = "[redacted]"
MIN_SECRET: Final = 8

T = TypeVar("T")


def secrets_of(values: Iterable[str | None]) -> tuple[str, ...]:
    """The values worth redacting, longest first (so a key that contains another goes whole)."""
    found = {v for v in values if v is not None and len(v) >= MIN_SECRET}
    return tuple(sorted(found, key=len, reverse=True))


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_value(value: T, secrets: Sequence[str]) -> T:
    """``value`` with every string in it redacted: strings, lists, tuples, dicts (keys too)
    and attrs instances (a journal event), rebuilt only where something changed."""
    if not secrets:
        return value
    out: Any = value
    if isinstance(value, str):
        out = redact(value, secrets)
    elif isinstance(value, list | tuple):
        items = [redact_value(v, secrets) for v in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            out = type(value)(items)
    elif isinstance(value, dict):
        old_pairs = list(value.items())
        pairs = [(redact_value(k, secrets), redact_value(v, secrets)) for k, v in old_pairs]
        if any(new is not old for p, q in zip(pairs, old_pairs, strict=True)
               for new, old in zip(p, q, strict=True)):
            out = dict(pairs)
    elif attrs.has(type(value)):
        changes = {}
        for field in attrs.fields(type(value)):  # type: ignore[arg-type]
            old = getattr(value, field.name)
            new = redact_value(old, secrets)
            if new is not old:
                changes[field.name] = new
        out = attrs.evolve(value, **changes) if changes else value  # type: ignore[misc]
    result: T = out
    return result


class StreamRedactor:
    """Redacts a byte stream that arrives in chunks: a key split between two chunks is still
    caught, because the last ``len(longest key) - 1`` bytes are held back until the next chunk
    (or the end of the stream) shows whether they start one; never those of a complete line,
    when no key holds a newline."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self._secrets = [s.encode("utf-8", "surrogateescape") for s in secrets]
        self._keep = max((len(s) for s in self._secrets), default=1) - 1
        self._mask = MASK.encode()
        self._held = b""
        #: No secret spans a line: a complete line can go out at once (an agent's stream is
        #: read line by line as it is written, and must not wait for the next chunk).
        self._by_line = not any(b"\n" in s for s in self._secrets)

    def feed(self, chunk: bytes) -> bytes:
        """What of the stream so far can be written out now."""
        data = self._held + chunk
        for secret in self._secrets:
            if secret in data:
                data = data.replace(secret, self._mask)
        if self._keep <= 0:
            self._held = b""
            return data
        cut = max(0, len(data) - self._keep)
        if self._by_line:
            cut = max(cut, data.rfind(b"\n") + 1)
        self._held = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        """The bytes held back, at the end of the stream (or of a pause in it)."""
        held, self._held = self._held, b""
        return held
