"""The fold is total: whatever a hook, the supervisor, an adapter or a user writes to a journal
(any JSON value in any field of any event type, in any order), folding it returns a state,
through the fast path, the incremental reader and the fold cache alike, and never raises.

The event types and field names are taken from the code (the classifier's hook sets, the
tagged union of coordinator events, the hook's field list), not listed by hand, so a field or
an event added later is covered without touching this file."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleet._core.fold as fold_module
from fleet._core import classify
from fleet._core import events as ev
from fleet._core.accumulator import Accumulator
from fleet._core.attention import attention_details, mode_text, next_step, reason_text
from fleet._core.fold import Policy, feed, feed_lines, snapshot
from fleet._fold_cache import load_states
from fleet._home import journal_path, worker_dir

CORE = Path(fold_module.__file__).parent

HOOK_TYPES = sorted(
    classify.ACTIVITY_HOOKS | classify._STATE_HOOKS | classify.IGNORED_HOOKS
    | classify._QUIET_HOOKS
)
COORDINATOR_TYPES = sorted(ev.TAGS)
EVENT_TYPES = [*HOOK_TYPES, *COORDINATOR_TYPES, "SomethingNew", "something_new"]
ENVELOPE = ("v", "ts", "src", "type")
FIELDS = sorted(
    set(ev.HOOK_FIELDS)
    | {f.name for cls in ev.TAGS.values() for f in attrs.fields(cls)}
    | {"unexpected"}
)
SOURCES = [*sorted(ev.HOOK_SOURCES), "fleet", "monitor", "superset", "herdr", "supervisor"]

#: Values that mean something to the fold, so that random journals reach its deeper paths
#: (taken from the classifier's own vocabularies where it has them).
MEANINGFUL: list[Any] = [
    *sorted(classify.KNOWN_NOTIFICATIONS),
    *sorted(classify.ACCOUNT_ERRORS),
    *sorted(classify.KNOWN_STATUSES),
    "compact", "startup", "task-notification", "checked", "failed", "stopped", "timeout",
    "limit", "rate_limit", "AskUserQuestion", "Bash", "s1", "w1@1", "w1@3q",
    "done\nFLEET_WORKER_DONE: ok", "FLEET_WORKER_BLOCKED: token", "You've hit your limit",
    0, 1, 2, 4242, 429, 529, 1000.5, True, False, None, [], {}, ["Bash(ls)"],
    {"terminal": "t1"}, {"mode": "dontAsk", "allowed_tools": ["Read"]},
    {"sandbox": "workspace-write", "approval": "on-request", "network": True},
    {"mode": 5, "allowed_tools": 7}, {"sandbox": {"a": 1}}, [{"criterion": "c", "verdict": "v"}],
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
any_json = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
#: One value of each JSON type, the odd ones included.
EACH_KIND: list[Any] = [None, True, 0, -1, 2**63, 2**64 + 1, 1.5, 1e300, "", "x", [], ["x"], {},
                        {"a": 1}, [[{"a": [1]}]]]
values = st.one_of(st.sampled_from(MEANINGFUL), st.sampled_from(EACH_KIND), any_json)
timestamps = st.sampled_from([0, -1, 1e300, 2**63, "1000", None, float("nan"), math.inf])


def _dump(obj: Any) -> bytes:
    # The stdlib writes what orjson refuses (integers past 64 bits, NaN): a journal may hold it.
    try:
        return json.dumps(obj).encode()
    except (ValueError, TypeError):
        return b"{not json"


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([b"", b"{", b"[]", b"null", b"\xff\xfe", b'"x"', b"1e999"]))
    kind = draw(st.sampled_from(sorted(classify._STATE_HOOKS)) if draw(st.booleans())
                else st.sampled_from(EVENT_TYPES))
    hook = kind in HOOK_TYPES
    obj: dict[str, Any] = {
        # a well-formed envelope mostly, so that most lines reach the fold's rules
        "v": 1 if draw(st.integers(0, 9)) else draw(st.sampled_from([2, 0, "1", None, 1.0])),
        "ts": draw(timestamps if draw(st.integers(0, 9)) == 0 else st.floats(1000.0, 1100.0)),
        "src": draw(st.sampled_from(SOURCES[:2] if hook else SOURCES[2:]))
        if draw(st.integers(0, 9)) else draw(values),
        "type": kind if draw(st.integers(0, 19)) else draw(values),
    }
    # mostly the fields this type has (for a hook, mostly those the fold reads), sometimes any
    own = (sorted(ev.HOOK_READS) if draw(st.booleans()) else sorted(ev.HOOK_FIELDS)) if hook \
        else [f.name for f in attrs.fields(ev.TAGS[kind])] if kind in ev.TAGS else FIELDS
    obj.update(draw(st.fixed_dictionaries({}, optional=dict.fromkeys(own, values))))
    obj.update(draw(st.dictionaries(st.sampled_from(FIELDS), values, max_size=2)))
    if draw(st.integers(0, 29)) == 0:
        del obj[draw(st.sampled_from(ENVELOPE))]
    return _dump(obj)


journals = st.lists(lines(), max_size=30)


def _fold_lines(raw: list[bytes]) -> Accumulator:
    return feed_lines(Accumulator(), raw, 0, "w1")


def _render(acc: Accumulator, now: float) -> None:
    state = snapshot("w1", acc, now, Policy(quiet_after=30.0))
    orjson.dumps(attention_details(state), default=str)
    next_step(state), reason_text(state), mode_text(state)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(journals, st.integers(0, 30), st.floats(1000.0, 1200.0))
def test_any_journal_folds_the_same_every_way_and_never_raises(
    raw: list[bytes], cut: int, now: float
) -> None:
    acc = _fold_lines(raw)
    # the fast path folds exactly what decoding each line and stepping folds
    assert feed(Accumulator(), ((i, ev.decode_line(line)) for i, line in enumerate(raw)),
                "w1") == acc
    # in two pieces, as a tailer or a cache resuming mid-journal would
    cut = min(cut, len(raw))
    resumed = Accumulator.from_dict(orjson.loads(orjson.dumps(
        feed_lines(Accumulator(), raw[:cut], 0, "w1").to_dict()
    )))
    assert feed_lines(resumed, raw[cut:], cut, "w1") == acc
    _render(acc, now)
    assert acc.events == len(raw)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(journals, journals)
def test_the_fold_cache_gives_what_a_replay_gives_on_any_journal(
    tmp_path_factory: pytest.TempPathFactory, first: list[bytes], then: list[bytes]
) -> None:
    home = tmp_path_factory.mktemp("home")
    worker_dir(home, "w1").mkdir(parents=True)
    path = journal_path(home, "w1")
    path.write_bytes(b"".join(line.replace(b"\n", b" ") + b"\n" for line in first))
    cold = load_states(home, None, 1100.0)
    assert cold == load_states(home, None, 1100.0, use_cache=False)
    with path.open("ab") as f:
        f.write(b"".join(line.replace(b"\n", b" ") + b"\n" for line in then))
    warm = load_states(home, None, 1100.0)
    assert warm == load_states(home, None, 1100.0, use_cache=False)
    assert warm[0].events == len(first) + len(then)


#: Where the journal is when an odd line comes: fresh, working, blocked, done, gone.
PRELUDES: list[list[dict[str, Any]]] = [
    [],
    [{"type": "UserPromptSubmit", "src": "claude"}],
    [{"type": "PermissionRequest", "src": "claude", "tool_name": "Bash"}],
    [{"type": "Stop", "src": "claude", "last_assistant_message": "FLEET_WORKER_DONE: ok"}],
    [{"type": "started", "src": "fleet", "pid": 4242},
     {"type": "exited", "src": "fleet", "exit_code": 1}],
]


def test_every_field_of_every_event_type_takes_a_value_of_every_kind() -> None:
    """Exhaustive over the code's own lists: each event type, each field any event has, each
    kind of JSON value, after each kind of history; folded both ways."""
    heads = [[orjson.dumps({"v": 1, "ts": 1000.0 + i, **e}) for i, e in enumerate(prelude)]
             for prelude in PRELUDES]
    n = 0
    for kind in EVENT_TYPES:
        src = "claude" if kind in HOOK_TYPES else "fleet"
        for name in (*FIELDS, *ENVELOPE):
            for value in EACH_KIND:
                for head in (heads[0], heads[1 + n % (len(heads) - 1)]):
                    n += 1
                    obj = {"v": 1, "ts": 1010.0, "src": src, "type": kind, name: value}
                    raw = [*head, _dump(obj)]
                    acc = _fold_lines(raw)
                    assert feed(Accumulator(), ((i, ev.decode_line(line))
                                                for i, line in enumerate(raw)), "w1") == acc
                    _render(acc, 1100.0)


def test_an_object_where_a_notification_type_belongs_is_counted_not_fatal() -> None:
    line = orjson.dumps({"v": 1, "ts": 1000.0, "src": "claude", "type": "Notification",
                         "notification_type": {"a": 1}, "message": "hi"})
    acc = _fold_lines([line])
    assert (acc.state, acc.malformed, acc.unknown, acc.notification) == ("starting", 1, 1, "hi")
    event = ev.decode_line(line)
    assert feed(Accumulator(), [(0, event)]) == acc


@pytest.mark.parametrize(
    ("field", "value"),
    [("notification_type", {"a": 1}), ("source", ["compact"]), ("origin", {"kind": "x"}),
     ("tool_name", 5), ("error", {"e": 1}), ("background_tasks", True),
     ("background_tasks", -1), ("agent_pid", 2**40), ("agent_start", "9"),
     ("session_id", 1.5), ("permission_mode", []), ("last_assistant_message", {"m": 1}),
     ("to_model", False), ("message", 3)],
)
def test_each_field_the_fold_reads_is_type_checked(field: str, value: Any) -> None:
    hooks = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
             "Notification", "Stop", "StopFailure", "SessionEnd", "PostModelSwitch"]
    raw = [orjson.dumps({"v": 1, "ts": 1000.0 + i, "src": "claude", "type": hook,
                         field: value}) for i, hook in enumerate(hooks)]
    acc = _fold_lines(raw)
    # counted on each line whose hook the fold reads that field of
    reading = [h for h in hooks
               if field in (*ev.EVERY_HOOK_READS, *ev.HOOK_READS_BY_HOOK.get(h, ()))]
    assert reading and acc.malformed == len(reading)
    clean = _fold_lines([orjson.dumps({**orjson.loads(line), field: None}) for line in raw])
    assert attrs.evolve(acc, malformed=0) == clean


def _reads(module: Path) -> tuple[set[str], list[str]]:
    """The field names a module reads through the typed accessors, and every raw read left
    (``x.get(...)`` or ``x["..."]``)."""
    accessors = {"text", "whole", "str_field", "int_field", "ts_field", "bool_field",
                 "number_field", "dict_field", "list_field"}
    names: set[str] = set()
    raw: list[str] = []
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            keys = [a.value for a in node.args if isinstance(a, ast.Constant)
                    and isinstance(a.value, str)]
            if called in accessors and keys:
                names.add(keys[0])
            elif called == "get":
                raw.append(f"{module.name}:{node.lineno}")
        elif (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
              and isinstance(node.slice.value, str)
              and not (isinstance(node.value, ast.Name) and node.value.id == "m")):
            # (``m[...]`` is a regex match's group, not data)
            raw.append(f"{module.name}:{node.lineno}")
    return names, raw


def test_every_field_the_fold_reads_is_read_typed_and_declared() -> None:
    names: set[str] = set()
    raw: list[str] = []
    for module in ("fold.py", "classify.py", "accumulator.py"):
        found, left = _reads(CORE / module)
        names |= found
        raw += left
    assert raw == []
    assert names - set(ENVELOPE) == set(ev.HOOK_READS)
    assert set(ev.HOOK_READS) <= set(ev.HOOK_FIELDS)
    by_hook = {f for fields in ev.HOOK_READS_BY_HOOK.values() for f in fields}
    assert by_hook | set(ev.EVERY_HOOK_READS) == set(ev.HOOK_READS)
    assert set(ev.HOOK_READS_BY_HOOK) <= set(HOOK_TYPES)


@pytest.mark.parametrize("hook", HOOK_TYPES)
def test_a_field_the_fold_does_not_count_is_one_it_does_not_read(hook: str) -> None:
    """For each hook and each field: an unusable value folds exactly as the field's absence,
    and the line is counted if and only if the fold reads that field for that hook."""
    for field in ev.HOOK_READS:
        for value in ({"a": 1}, ["x"], True, 2**63, 1.5, "x", -1):
            bad = {"v": 1, "ts": 1010.0, "src": "claude", "type": hook, field: value}
            for head in ([], [orjson.dumps({"v": 1, "ts": 1000.0, "src": "claude",
                                             "type": "UserPromptSubmit"})]):
                acc = _fold_lines([*head, orjson.dumps(bad)])
                absent = _fold_lines([*head, orjson.dumps({**bad, field: None})])
                assert attrs.evolve(acc, malformed=0) == absent or acc.malformed == 0
                counted = ev.unusable(value, field) and field in (
                    *ev.EVERY_HOOK_READS, *ev.HOOK_READS_BY_HOOK.get(hook, ()))
                assert acc.malformed == int(counted), (hook, field, value)
                if counted:
                    assert attrs.evolve(acc, malformed=0) == absent


def test_the_result_parser_reads_raw_output_only_through_the_accessors() -> None:
    assert _reads(CORE / "results.py")[1] == []
