"""Where a worker's API key comes from: ``env:NAME``, ``command:CMD`` or ``keyring:SERVICE/USER``.

A key source is a *reference* to a key, safe to journal, print and store. The key itself is
resolved at launch time, handed to the supervisor through a pipe and to the agent through its
environment only: never in argv, never in a file fleet writes, never in a log or an error message.
Errors therefore name the source, never the value or anything a command printed.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from fleet._errors import FleetError, SettingsError
from fleet._runner import Runner, SubprocessRunner

KeyKind = Literal["env", "command", "keyring"]
_KINDS: tuple[KeyKind, ...] = ("env", "command", "keyring")
KEY_SOURCE_HELP = "env:NAME, command:CMD (first line of its output) or keyring:SERVICE/USER"


class KeyUnavailable(FleetError, LookupError):
    """A key source that gives no usable key (unset variable, failing command, no keyring)."""


@attrs.frozen(kw_only=True)
class KeySource:
    """``kind`` and its argument: a variable name, a shell command, or ``SERVICE/USER``."""

    kind: KeyKind
    ref: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.ref}"

    @property
    def shown(self) -> str:
        """The source as error messages name it: a command by its program only, since the
        rest of a command line may hold a key (``command:printf sk-...``)."""
        if self.kind != "command":
            return str(self)
        program, _, rest = self.ref.strip().partition(" ")
        return f"command:{program}{' …' if rest.strip() else ''}"


#: Said instead of what was given, which may well be the key itself, pasted in the wrong place.
_NOT_SHOWN = "(what was given is not shown: it may be a key)"


def parse_key_source(spec: str) -> KeySource:
    """Parse ``env:NAME``, ``command:CMD`` or ``keyring:SERVICE/USER``. A refusal never
    repeats the text it was given."""
    kind, sep, ref = spec.partition(":")
    if not sep or kind not in _KINDS or not ref.strip():
        raise SettingsError(f"not a key source: use {KEY_SOURCE_HELP} {_NOT_SHOWN}")
    if kind == "env" and (not ref.replace("_", "a").isalnum() or ref[0].isdigit()):
        raise SettingsError(
            f"key source env:NAME needs an environment variable name after env: {_NOT_SHOWN}"
        )
    if kind == "keyring" and ("/" not in ref or ref.startswith("/") or ref.endswith("/")):
        raise SettingsError(f"key source keyring: needs SERVICE/USER after keyring: {_NOT_SHOWN}")
    return KeySource(kind=kind, ref=ref)


def resolve_key(
    source: KeySource | str,
    *,
    environ: Mapping[str, str] | None = None,
    runner: Runner | None = None,
    timeout: float = 30.0,
) -> str:
    """The key a source gives, with surrounding whitespace (a trailing CR/LF) removed."""
    src = parse_key_source(source) if isinstance(source, str) else source
    env = os.environ if environ is None else environ
    if src.kind == "env":
        value = env.get(src.ref)
        if value is None:
            raise KeyUnavailable(f"key source {src}: ${src.ref} is not set")
    elif src.kind == "command":
        # The command's output may be the key: report only its exit code, never its output.
        done = (runner or SubprocessRunner()).run(
            ["/bin/sh", "-c", src.ref], env=dict(env), timeout=timeout
        )
        if done.returncode != 0:
            raise KeyUnavailable(f"key source {src.shown}: the command exited {done.returncode}")
        lines = done.stdout.splitlines()
        value = lines[0] if lines else ""
    else:
        value = _from_keyring(src)
    value = value.strip()
    if not value:
        raise KeyUnavailable(f"key source {src.shown} gave an empty key")
    if any(c.isspace() for c in value) or not value.isprintable():
        raise KeyUnavailable(
            f"key source {src.shown} gave a key with spaces or control characters"
        )
    return value


def _from_keyring(src: KeySource) -> str:
    try:
        keyring: Any = importlib.import_module("keyring")
    except ImportError:
        raise KeyUnavailable(
            f"key source {src} needs the 'keyring' package: pip install keyring"
        ) from None
    service, _, user = src.ref.rpartition("/")
    try:
        value = keyring.get_password(service, user)
    except Exception as exc:  # keyring backends raise their own types
        raise KeyUnavailable(
            f"key source {src}: the keyring failed ({type(exc).__name__})"
        ) from None
    if not isinstance(value, str):
        raise KeyUnavailable(f"key source {src}: no password for {user!r} in service {service!r}")
    return value
