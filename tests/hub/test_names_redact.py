"""The hub's pure parts: names, marks and subjects; redaction; configuration."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet._errors import InvalidMark, InvalidWorkerId, SettingsError
from fleet._hub.config import HubConfig, resolve_hub
from fleet._hub.names import (
    coordinator_of_rpc,
    default_host_id,
    journal_subject,
    msg_id,
    parse_hub_mark,
    rpc_subject,
    seen_key,
    split_worker,
    token,
    untoken,
)
from fleet._hub.redact import MAX_LINE, REDACTED, redact_line, redact_text

ids = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)


@given(ids, ids)
def test_every_worker_has_one_subject_of_three_tokens_and_back(host: str, worker: str) -> None:
    subject = journal_subject(host, worker)
    parts = subject.split(".")
    assert len(parts) == 3 and all(parts) and parts[0] == "fleet"
    assert (untoken(parts[1]), untoken(parts[2])) == (host, worker)
    assert len(rpc_subject(host, worker).split(".")) == 4  # never captured by fleet.*.*
    assert coordinator_of_rpc(rpc_subject(host, worker)) == worker
    assert split_worker(f"{host}/{worker}") == (host, worker)


@given(ids, ids, ids, st.integers(0, 10**9), st.sampled_from(["", "q", "o"]))
def test_marks_and_seen_keys(coord: str, host: str, worker: str, seq: int, kind: str) -> None:
    mark = parse_hub_mark(f"{host}/{worker}@{seq}{kind}")
    assert str(mark) == f"{host}/{worker}@{seq}{kind}"
    assert mark.local == f"{worker}@{seq}{kind}"
    key = seen_key(coord, mark)
    assert all(key.split(".")) and "/" not in key


def test_malformed_ids_and_marks_are_refused() -> None:
    for bad in ("w1", "a/b/c", "A/b", "a/", "/b", "a/../b"):
        with pytest.raises(InvalidWorkerId):
            split_worker(bad)
    for bad in ("a/b", "a/b@", "a/b@01", "a/b@1x", "b@1"):
        with pytest.raises(InvalidMark):
            parse_hub_mark(bad)


def test_message_ids_differ_between_generations() -> None:
    assert msg_id("h", "w", 0, 120) == "h/w/120"
    assert msg_id("h", "w", 2, 120) == "h/w/g2/120"
    assert token("a.b") == "a=b"


def test_the_default_host_id_is_the_short_host_name() -> None:
    assert default_host_id("Build-01.example.com") == "build-01"
    assert default_host_id("___") == "host"


SECRETS = [
    "sk-ant-api03-" + "x1" * 20,
    "sk-proj-" + "Ab3" * 15,
    "ghp_" + "a" * 36,
    "github_pat_" + "B" * 50,
    "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "AIza" + "C" * 35,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "SUAACAIBAEAQCAIBAEAQCAIBAEAQCAIBAEAQCAIBAEAQCAIBAEAQCAN7EY",
]


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s[:8])
def test_credential_shapes_are_redacted_and_the_line_stays_json(secret: str) -> None:
    line = orjson.dumps({"v": 1, "ts": 1.0, "src": "claude", "type": "Stop",
                         "last_assistant_message": f"here: {secret} (do not share)\nbye"})
    out = redact_line(line)
    assert secret.encode() not in out
    assert orjson.loads(out)["last_assistant_message"] == f"here: {REDACTED} (do not share)\nbye"


def test_passwords_bearer_tokens_and_secret_fields_are_redacted() -> None:
    text = (b"curl -H 'Authorization: Bearer abcdefghijklmnop1234' "
            b"https://bob:hunter2hunter2@example.com password=correcthorse token: 0123456789abc")
    out = redact_text(text)
    for secret in (b"abcdefghijklmnop1234", b"hunter2hunter2", b"correcthorse", b"0123456789abc"):
        assert secret not in out
    assert b"https://bob:[redacted]@example.com" in out
    line = orjson.dumps({"v": 1, "ts": 1.0, "src": "fleet", "type": "x",
                         "raw": {"api_key": "plain-text-value", "session_id": "s1",
                                 "headers": [{"authorization": "abc"}]}})
    data = orjson.loads(redact_line(line))
    assert data["raw"] == {"api_key": REDACTED, "session_id": "s1",
                           "headers": [{"authorization": REDACTED}]}


def test_a_line_with_nothing_to_redact_is_shipped_byte_for_byte() -> None:
    line = (b'{"v":1,"ts":1.5,"src":"claude","type":"PostToolUse","session_id":"s-1",'
            b'"tool_name":"Bash","input_tokens":12}')
    assert redact_line(line) is line or redact_line(line) == line
    assert redact_line(b"x" * (MAX_LINE + 1)).startswith(b"fleet: line of ")


def test_hub_configuration_comes_from_arguments_environment_and_settings(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    from pathlib import Path

    settings = Path(str(tmp_path)) / "fleet.json"
    settings.write_text(json.dumps({"hub": {"url": "nats://hub:4222", "user": "u",
                                            "passwordFrom": "env:PW", "offlineAfter": 12,
                                            "coordinator": "lead"}}))
    monkeypatch.setenv("PW", "pw-from-env")
    cfg = resolve_hub(None, environ={"PW": "x"}, settings_path=settings)
    assert (cfg.url, cfg.user, cfg.password, cfg.offline_after, cfg.coordinator) == (
        "nats://hub:4222", "u", "pw-from-env", 12.0, "lead")
    cfg = resolve_hub("other:4222", environ={"FLEET_HUB_USER": "e"}, settings_path=settings)
    assert (cfg.servers(), cfg.user) == (["nats://other:4222"], "e")
    assert HubConfig(url="nats://a:b@h:1,nats://h2:2").display() == "nats://h:1,nats://h2:2"
    with pytest.raises(SettingsError, match="no hub named"):
        resolve_hub(None, environ={}, settings_path=Path(str(tmp_path)) / "none.json")
    settings.write_text(json.dumps({"hub": {"url": "x", "offlineAfter": -1}}))
    with pytest.raises(SettingsError, match="more than 0 seconds"):
        resolve_hub(None, environ={}, settings_path=settings)


def test_insecure_and_trust_come_from_arguments_environment_and_settings(
    tmp_path: object,
) -> None:
    import json
    from pathlib import Path

    settings = Path(str(tmp_path)) / "fleet.json"
    settings.write_text(json.dumps({"hub": {"url": "h", "trust": "lead, desk,lead"}}))
    cfg = resolve_hub(None, environ={}, settings_path=settings)
    assert (cfg.insecure, cfg.trust) == (False, ("lead", "desk"))
    assert resolve_hub(None, trust=["x"], environ={}, settings_path=settings).trust == ("x",)
    assert resolve_hub(None, environ={"FLEET_HUB_INSECURE": "1"}, settings_path=settings).insecure
    assert not resolve_hub(None, environ={"FLEET_HUB_INSECURE": "0"},
                           settings_path=settings).insecure
    with pytest.raises(SettingsError, match="FLEET_HUB_INSECURE must be 1 or 0"):
        resolve_hub(None, environ={"FLEET_HUB_INSECURE": "yes"}, settings_path=settings)
    settings.write_text(json.dumps({"hub": {"url": "h", "insecure": True, "trust": ["a"]}}))
    with pytest.raises(SettingsError, match=r"hub\.trust must be coordinator names"):
        resolve_hub(None, environ={}, settings_path=settings)
    settings.write_text(json.dumps({"hub": {"url": "h", "insecure": "true"}}))
    with pytest.raises(SettingsError, match=r"hub\.insecure must be true or false"):
        resolve_hub(None, environ={}, settings_path=settings)
    settings.write_text(json.dumps({"hub": {"url": "h", "insecure": True}}))
    assert resolve_hub(None, environ={}, settings_path=settings).insecure
    settings.write_text(json.dumps({"hub": {"url": "h", "trust": "Bad Name"}}))
    with pytest.raises(InvalidWorkerId, match="invalid host id"):
        resolve_hub(None, environ={}, settings_path=settings)


@pytest.mark.parametrize(
    "url",
    [" ", ",", "nats://a b", "http://hub", "nats://", "../../etc", "-1", "0x10", "127.1",
     "hub:0", "hub:99999", "hub:port", "nats://hub/path", "nats://hub?x=1", "a\x00b",
     "caf\udce9", "x" * 300],
)
def test_a_malformed_hub_address_is_refused_before_any_connection(url: str) -> None:
    with pytest.raises(SettingsError, match="hub address"):
        resolve_hub(url, environ={})


@pytest.mark.parametrize(
    "url",
    ["127.0.0.1", "nats://127.0.0.1:4222", "hub.example.com", "tls://u:p@hub:4443",
     "nats://[::1]:4222", "a:1,b:2", "ws://hub:8080/", "localhost"],
)
def test_a_well_formed_hub_address_is_kept_as_written(url: str) -> None:
    assert resolve_hub(url, environ={}).url == url


def test_a_hub_whose_name_does_not_resolve_is_said_at_once_not_after_retries() -> None:
    import time

    from fleet._hub import client as hc

    rt = hc.Runtime()
    try:
        started = time.monotonic()
        with pytest.raises(hc.HubUnreachable, match="no server's name resolves") as info:
            rt.call(hc.connect_once(resolve_hub("nowhere.invalid", environ={}), name="t",
                                    timeout=30), 40)
        assert info.value.lasting
        assert time.monotonic() - started < 5
    finally:
        rt.close()
