from __future__ import annotations

import orjson
from hypothesis import given

from fleet._core import events as ev
from fleet._core.events import decode_line, encode_line

from .strategies import events


@given(events())
def test_every_event_round_trips(event: ev.Event) -> None:
    line = encode_line(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_line(line[:-1]) == event


def test_envelope_comes_first() -> None:
    line = encode_line(ev.Seen(ts=5.0, mark="w@1"))
    assert list(orjson.loads(line))[:4] == ["v", "ts", "src", "type"]


def test_unknown_type_is_kept_with_raw_data() -> None:
    event = decode_line(b'{"v":1,"ts":3,"src":"fleet","type":"teleported","where":"mars"}')
    assert isinstance(event, ev.UnknownEvent)
    assert event.type == "teleported" and event.raw == {"where": "mars"}


def test_newer_schema_is_kept_as_unknown() -> None:
    event = decode_line(b'{"v":9,"ts":3,"src":"fleet","type":"seen","mark":"w@1"}')
    assert isinstance(event, ev.UnknownEvent)


def test_hook_events_keep_their_name_and_only_bounded_fields() -> None:
    line = (
        b'{"v":1,"ts":3.5,"src":"claude","type":"PreToolUse","tool_name":"Bash",'
        b'"tool_input":{"command":"secret"},"session_id":"s"}'
    )
    event = decode_line(line)
    assert isinstance(event, ev.HookEvent)
    assert event.hook == "PreToolUse" and event.text("tool_name") == "Bash"
    assert "tool_input" not in event.data


def test_unreadable_lines() -> None:
    for raw in [
        b"",
        b"not json",
        b"[1,2]",
        b'{"ts":1}',
        b'{"v":1,"ts":"x","src":"a","type":"b"}',
        b"\xff\xfe",
        b'{"v":1,"ts":1,"src":"fleet","type":"started","pid":"nope"}',
    ]:
        event = decode_line(raw)
        assert isinstance(event, ev.Unreadable), raw
        assert event.error
