"""Key sources resolve to a key, and their errors never show it."""

from __future__ import annotations

import sys

import pytest

from fleet._errors import SettingsError
from fleet._keys import KeySource, KeyUnavailable, parse_key_source, resolve_key

SECRET = "sk-very-secret-value-0123456789"


def test_parse_forms() -> None:
    assert parse_key_source("env:MY_KEY") == KeySource(kind="env", ref="MY_KEY")
    assert parse_key_source("command:pass show x") == KeySource(kind="command", ref="pass show x")
    assert parse_key_source("keyring:zai/me") == KeySource(kind="keyring", ref="zai/me")
    assert str(parse_key_source("env:MY_KEY")) == "env:MY_KEY"


@pytest.mark.parametrize("spec", ["MY_KEY", "file:/x", "env:", "env:1BAD", "env:A-B",
                                  "keyring:nouser", "keyring:/u", "command:  "])
def test_parse_refuses(spec: str) -> None:
    with pytest.raises(SettingsError):
        parse_key_source(spec)


def test_env_source_strips_a_trailing_newline() -> None:
    assert resolve_key("env:K", environ={"K": SECRET + "\r\n"}) == SECRET


def test_env_source_unset() -> None:
    with pytest.raises(KeyUnavailable, match=r"\$K is not set"):
        resolve_key("env:K", environ={})


def test_command_source_takes_the_first_line() -> None:
    source = f"command:printf '{SECRET}\\nsecond\\n'"
    assert resolve_key(source, environ={"PATH": "/usr/bin:/bin"}) == SECRET


def test_command_failure_does_not_echo_its_output() -> None:
    with pytest.raises(KeyUnavailable) as info:
        resolve_key(f"command:echo {SECRET}; echo {SECRET} >&2; exit 3",
                    environ={"PATH": "/usr/bin:/bin"})
    assert "exited 3" in str(info.value)
    assert SECRET not in str(info.value).replace(f"echo {SECRET}", "")


def test_empty_or_spaced_keys_are_refused() -> None:
    with pytest.raises(KeyUnavailable, match="empty"):
        resolve_key("env:K", environ={"K": "  "})
    with pytest.raises(KeyUnavailable, match="spaces"):
        resolve_key("env:K", environ={"K": "two words"})


def test_keyring_without_the_package_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keyring", None)  # import keyring -> ImportError
    with pytest.raises(KeyUnavailable, match="pip install keyring"):
        resolve_key("keyring:svc/user")


def test_keyring_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    fake = types.ModuleType("keyring")
    store = {("svc", "user"): SECRET}
    fake.get_password = lambda service, user: store.get((service, user))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "keyring", fake)
    assert resolve_key("keyring:svc/user") == SECRET
    with pytest.raises(KeyUnavailable, match="no password"):
        resolve_key("keyring:svc/other")
