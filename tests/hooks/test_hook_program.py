"""fleet's hook program, run as the agents run it, with their real payloads and worse."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import stat
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

from fleet._core import events
from fleet._core.accumulator import find_envelope
from fleet._core.events import HookEvent, Unreadable
from fleet._hook_command import hook_script_path
from fleet._journal import index_worktree
from tests.hooks.conftest import Hook, claude_payloads, codex_payloads, every_claude_payload

CLAUDE = claude_payloads()
EVERY_CLAUDE = every_claude_payload()
CODEX = codex_payloads()


def load_impl() -> ModuleType:
    path = hook_script_path().parent / "fleet_hook_impl.py"
    spec = importlib.util.spec_from_file_location("fleet_hook_impl_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def only_event(hook: Hook) -> HookEvent:
    found = hook.events()
    assert len(found) == 1, found
    event = found[0]
    assert isinstance(event, HookEvent), event
    return event


def test_field_list_is_the_codecs() -> None:
    assert load_impl().HOOK_FIELDS == events.HOOK_FIELDS


@pytest.mark.parametrize("where", ["worker", "elsewhere"])
def test_loads_nothing_costly(hook: Hook, where: str) -> None:
    """The hook runs on every tool call: os, re, json, typing and friends cost more to import
    than everything the hook does."""
    import subprocess
    import sys

    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); import fleet_hook_impl as m; "
        "m.main(['--tool', 'claude']); sys.stderr.write(' '.join(sorted(sys.modules)))"
    )
    project = hook.worktree if where == "worker" else hook.elsewhere
    env = {"FLEET_HOME": str(hook.home), "CLAUDE_PROJECT_DIR": str(project)}
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", program, str(hook_script_path().parent)],
        input=json.dumps(CLAUDE["PreToolUse (Bash)"]).encode(), env=env,
        capture_output=True, timeout=60, check=True,
    )
    loaded = set(proc.stderr.decode().split())
    costly = {"os", "re", "json", "typing", "pathlib", "collections", "argparse", "contextlib",
              "functools", "enum", "__future__"} & loaded
    assert costly == set()
    assert len(hook.lines()) == (1 if where == "worker" else 0)
    if where == "elsewhere":
        assert not {"_json", "fcntl"} & loaded


def test_worker_id_rule_is_the_cores() -> None:
    impl = load_impl()
    from fleet._core.ids import is_worker_id

    samples = ["w1", "a", "A", "-a", ".a", "a" * 64, "a" * 65, "a/b", "é", "a\n", "", "0.x_y-z"]
    for sample in samples:
        assert impl.is_worker_id(sample) == is_worker_id(sample), sample


#: Requests the hook waits on for the coordinator's answer (tests/hooks/test_answer_hook.py).
WAITING = {name for name, p in EVERY_CLAUDE.items() if p["hook_event_name"] == "PermissionRequest"
           and p.get("tool_name") not in ("AskUserQuestion", "ExitPlanMode")}


@pytest.mark.parametrize("name", sorted(set(EVERY_CLAUDE) - WAITING))
def test_every_real_claude_payload(hook: Hook, name: str) -> None:
    payload = EVERY_CLAUDE[name]
    run = hook.run(payload, project=hook.worktree)
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
    event = only_event(hook)
    assert event.src == "claude"
    assert event.hook == payload["hook_event_name"]
    raw = json.loads(hook.lines()[0])
    assert set(raw) - {"v", "ts", "src", "type"} <= set(events.HOOK_FIELDS)
    for key in ("tool_input", "tool_response", "transcript_path", "prompt", "detail"):
        assert key not in raw
    for key in ("session_id", "tool_name", "tool_use_id", "error", "source", "agent_id"):
        if key in payload:
            assert raw[key] == payload[key]
    if isinstance(payload.get("background_tasks"), list):
        running = [t for t in payload["background_tasks"] if t.get("status") == "running"]
        assert raw["background_tasks"] == len(running)
    if payload["hook_event_name"] == "UserPromptSubmit":
        injected = payload["prompt"].startswith("<task-notification>")
        assert raw.get("origin") == ("task-notification" if injected else None)
    assert hook.error_lines() == []


@pytest.mark.parametrize("name", sorted(CODEX))
def test_every_real_codex_payload_found_by_cwd(hook: Hook, name: str) -> None:
    sub = hook.worktree / "src"
    sub.mkdir()
    payload = {**CODEX[name], "cwd": str(sub)}
    run = hook.run(payload, tool="codex")
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
    event = only_event(hook)
    assert (event.src, event.hook) == ("codex", payload["hook_event_name"])
    assert event.get("session_id") == payload["session_id"]
    assert "tool_input" not in json.loads(hook.lines()[0])


def test_stop_keeps_the_envelope_of_a_long_final_message(hook: Hook) -> None:
    message = "x" * 9000 + "\n\nFLEET_WORKER_DONE: all tests pass"
    hook.run({**CLAUDE["Stop"], "last_assistant_message": message}, project=hook.worktree)
    kept = only_event(hook).text("last_assistant_message")
    assert kept is not None and len(kept) <= 4096
    envelope = find_envelope(kept)
    assert envelope is not None and envelope.kind == "done"
    assert envelope.text == "all tests pass"


def test_strings_are_bounded(hook: Hook) -> None:
    payload = {
        **CLAUDE["Notification (permission_prompt)"],
        "message": "m" * 5000,
        "session_id": "s" * 5000,
        "error_details": {"k": "v" * 10000},
    }
    hook.run(payload, project=hook.worktree)
    event = only_event(hook)
    assert len(event.text("message") or "") == 500
    assert len(event.text("session_id") or "") == 500
    assert len(hook.lines()[0]) < 4000


def test_nested_error_details_are_kept_when_small(hook: Hook) -> None:
    details = {"status": 529, "kind": "overloaded", "retry": [1, 2.5, None, True]}
    hook.run({**CLAUDE["StopFailure (529)"], "error_details": details}, project=hook.worktree)
    assert only_event(hook).get("error_details") == details


def test_detail_summary_is_opt_in_and_redacted(hook: Hook) -> None:
    command = (
        "API_TOKEN=hunter2hunter2 curl -H 'Authorization: Bearer sk-live-abcdef0123456789' "
        "https://user:pa55word@example.com/x --token ghp_0123456789abcdefABCDEF0123"
    )
    payload = {**CLAUDE["PreToolUse (Bash)"], "tool_input": {"command": command, "timeout": 5}}
    hook.run(payload, project=hook.worktree)
    hook.run(payload, project=hook.worktree, env={"FLEET_HOOK_DETAIL": "summary"})
    plain, detailed = hook.events()
    assert isinstance(plain, HookEvent) and isinstance(detailed, HookEvent)
    assert plain.get("detail") is None
    detail = detailed.get("detail")
    assert detail["tool"] == "Bash"
    assert detail["input_keys"] == ["command", "timeout"]
    assert detail["command"].startswith("API_TOKEN=[redacted] curl")
    line = hook.lines()[1].decode()
    for secret in ("hunter2", "sk-live", "pa55word", "ghp_0123"):
        assert secret not in line


def test_fleet_worker_env_names_the_worker(hook: Hook) -> None:
    run = hook.run(CLAUDE["Stop"], project=hook.elsewhere, env={"FLEET_WORKER": "other-1"})
    assert run.returncode == 0
    assert hook.lines() == []
    assert len(hook.lines("other-1")) == 1
    journal = hook.home / "workers" / "other-1" / "journal.jsonl"
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert stat.S_IMODE(journal.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("bad", ["../escape", "UPPER", "", "a" * 65, "w1\n"])
def test_invalid_fleet_worker_is_a_failure_not_a_line(hook: Hook, bad: str) -> None:
    run = hook.run(CLAUDE["Stop"], project=hook.worktree, env={"FLEET_WORKER": bad})
    assert (run.returncode, run.stdout) == (0, b"")
    assert hook.lines() == []
    assert not (hook.home / "escape").exists()
    errors = hook.error_lines()
    assert len(errors) == 1 and "not a valid worker id" in errors[0]["error"]


class TestNotAWorker:
    def test_claude_project_elsewhere_writes_nothing(self, hook: Hook) -> None:
        run = hook.run(CLAUDE["PreToolUse (Bash)"], project=hook.elsewhere)
        assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
        assert list((hook.home / "workers").glob("*/journal.jsonl")) == []
        assert not hook.errors.exists()

    def test_is_decided_before_reading_the_payload(self, hook: Hook) -> None:
        # Garbage on stdin: a worker would record a failure; a non-worker never looks at it.
        run = hook.run(b"\xff\x00 not json", project=hook.elsewhere)
        assert run.returncode == 0
        assert not hook.errors.exists()

    def test_codex_cwd_elsewhere_writes_nothing(self, hook: Hook) -> None:
        hook.run({**CODEX["Stop"], "cwd": str(hook.elsewhere)}, tool="codex")
        assert hook.lines() == [] and not hook.errors.exists()

    def test_no_index_at_all(self, hook: Hook) -> None:
        (hook.home / "worktrees.tsv").unlink()
        hook.run(CLAUDE["Stop"], project=hook.worktree)
        assert hook.lines() == [] and not hook.errors.exists()

    def test_a_sibling_with_a_common_prefix_is_not_inside(self, hook: Hook) -> None:
        sibling = Path(str(hook.worktree) + "-other")
        sibling.mkdir()
        hook.run(CLAUDE["Stop"], project=sibling)
        assert hook.lines() == []


def test_longest_containing_worktree_wins(hook: Hook) -> None:
    inner = hook.worktree / "nested"
    inner.mkdir()
    index_worktree(hook.home, "inner", str(inner))
    hook.run(CLAUDE["Stop"], project=inner / "deeper")
    hook.run(CLAUDE["Stop"], project=hook.worktree / "other")
    assert len(hook.lines("inner")) == 1
    assert len(hook.lines("w1")) == 1


def test_last_index_line_for_a_path_wins(hook: Hook) -> None:
    index_worktree(hook.home, "w2", str(hook.worktree))
    hook.run(CLAUDE["Stop"], project=hook.worktree)
    assert hook.lines("w1") == [] and len(hook.lines("w2")) == 1


def test_a_half_written_index_line_is_ignored(hook: Hook) -> None:
    index = hook.home / "worktrees.tsv"
    with index.open("a") as f:
        f.write(f"{hook.worktree}\tw")  # "w2" on its way, no newline yet
    hook.run(CLAUDE["Stop"], project=hook.worktree)
    assert len(hook.lines("w1")) == 1 and hook.lines("w") == []


def test_symlinked_project_dir_is_resolved(hook: Hook, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(hook.worktree)
    hook.run(CLAUDE["Stop"], project=link)
    assert len(hook.lines()) == 1


def test_fleet_home_env_wins_over_the_baked_home(hook: Hook, tmp_path: Path) -> None:
    other_home = tmp_path / "other-home"
    index_worktree(other_home, "w9", str(hook.worktree))
    hook.run(CLAUDE["Stop"], project=hook.worktree, env={"FLEET_HOME": str(other_home)})
    assert hook.lines() == []
    assert (other_home / "workers" / "w9" / "journal.jsonl").is_file()


def test_baked_home_is_used_without_fleet_home(hook: Hook) -> None:
    hook.run(CLAUDE["Stop"], project=hook.worktree, home_env=False)
    assert len(hook.lines()) == 1


class TestTorture:
    """Whatever arrives on stdin: exit 0, print nothing, never a line that does not decode."""

    CASES: ClassVar[dict[str, bytes]] = {
        "empty": b"",
        "whitespace": b"  \n\t ",
        "not json": b"hello, world",
        "array": b"[1, 2, 3]",
        "string": b'"Stop"',
        "null": b"null",
        "truncated": json.dumps(CLAUDE["Stop"]).encode()[:-30],
        "binary": bytes(random.Random(7).randrange(256) for _ in range(4096)),
        "nul bytes": b'{"hook_event_name": "Stop\x00", "session_id": "a\x00b"}',
        "lone surrogates": b'{"hook_event_name": "Stop", "last_assistant_message": "x\\ud800y"}',
        "invalid utf-8": b'{"hook_event_name": "Stop", "message": "\xff\xfe"}',
        "nan": b'{"hook_event_name": "Stop", "error_details": {"x": NaN}, "model": Infinity}',
        "deep": b'{"hook_event_name": "Stop", "error_details": ' + b"[" * 100000 + b"]" * 100000
        + b"}",
        "wrong types": b'{"hook_event_name": 5, "session_id": {"a": 1}}',
        "event not a string": b'{"hook_event_name": ["Stop"]}',
        "huge type": json.dumps({"hook_event_name": "S" * 100000}).encode(),
    }

    @pytest.mark.parametrize("name", sorted(CASES))
    def test_survives(self, hook: Hook, name: str) -> None:
        run = hook.run(self.CASES[name], project=hook.worktree)
        assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
        lines = hook.lines()
        errors = hook.error_lines()
        assert lines or errors, "either a line or a recorded failure"
        for event in hook.events():
            assert not isinstance(event, Unreadable), event
            assert isinstance(event, HookEvent)
        for line in lines:
            assert len(line) < 20000

    def test_huge_payload_is_salvaged_and_reported(self, hook: Hook) -> None:
        payload = {
            "session_id": "s1",
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_response": "z" * (3 << 20),
            "tool_use_id": "after-the-cut",
        }
        run = hook.run(payload, project=hook.worktree)
        assert (run.returncode, run.stdout) == (0, b"")
        event = only_event(hook)
        assert (event.hook, event.get("session_id"), event.get("tool_name")) == (
            "PostToolUse", "s1", "Read",
        )
        assert event.get("tool_use_id") is None
        errors = hook.error_lines()
        assert len(errors) == 1 and "over" in errors[0]["error"]
        assert errors[0]["worker"] == "w1" and errors[0]["type"] == "PostToolUse"

    def test_no_stdin_at_all(self, hook: Hook) -> None:
        import subprocess

        from fleet._hook_command import hook_argv

        env = {"PATH": os.environ["PATH"], "FLEET_HOME": str(hook.home),
               "CLAUDE_PROJECT_DIR": str(hook.worktree)}
        proc = subprocess.run(hook_argv("claude", home=hook.home), stdin=subprocess.DEVNULL,
                              env=env, capture_output=True, timeout=60, check=False)
        assert (proc.returncode, proc.stdout) == (0, b"")
        assert hook.lines() == []
        assert "empty" in hook.error_lines()[0]["error"]


class TestWriteFailures:
    def test_unwritable_journal_is_reported(self, hook: Hook) -> None:
        hook.journal.parent.mkdir(parents=True)
        hook.journal.mkdir()  # a directory where the file should be
        run = hook.run(CLAUDE["Stop"], project=hook.worktree)
        assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
        errors = hook.error_lines()
        assert len(errors) == 1
        assert errors[0]["worker"] == "w1" and errors[0]["type"] == "Stop"
        assert "cannot open journal" in errors[0]["error"]

    def test_full_disk_is_reported(self, hook: Hook) -> None:
        if not Path("/dev/full").exists():
            pytest.fail("this test needs /dev/full to simulate a full disk")
        hook.journal.parent.mkdir(parents=True)
        hook.journal.symlink_to("/dev/full")
        run = hook.run(CLAUDE["Stop"], project=hook.worktree)
        assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
        errors = hook.error_lines()
        assert len(errors) == 1 and "No space left" in errors[0]["error"]

    def test_unusable_home_is_silent(self, hook: Hook, tmp_path: Path) -> None:
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        run = hook.run(CLAUDE["Stop"], project=hook.worktree, env={
            "FLEET_HOME": str(blocker / "home"), "FLEET_WORKER": "w1",
        })
        assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")

    def test_failure_before_any_home_exists_is_still_reported(
        self, hook: Hook, tmp_path: Path
    ) -> None:
        fresh = tmp_path / "fresh-home"
        hook.run(CLAUDE["Stop"], env={"FLEET_HOME": str(fresh), "FLEET_WORKER": "NOPE"})
        lines = (fresh / "hook-errors.log").read_bytes().splitlines()
        assert len(lines) == 1 and b"not a valid worker id" in lines[0]
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o700

    def test_error_log_stops_growing(self, hook: Hook) -> None:
        hook.errors.write_bytes(b"x" * (1 << 20) + b"\n")
        before = hook.errors.stat().st_size
        hook.run(b"garbage", project=hook.worktree)
        assert hook.errors.stat().st_size == before


def test_ts_is_when_the_agent_started_the_hook(hook: Hook) -> None:
    """A hook that gets going late (async, a loaded machine) still stamps its event with the
    time the agent spawned it, so it cannot look newer than the events that followed it."""
    import shlex
    import subprocess
    import time

    from fleet._hook_command import hook_argv

    command = "sleep 1.0; exec " + shlex.join(hook_argv("claude", home=hook.home))
    env = {"PATH": os.environ["PATH"], "FLEET_HOME": str(hook.home),
           "CLAUDE_PROJECT_DIR": str(hook.worktree)}
    before = time.time()
    subprocess.run(["/bin/sh", "-c", command], input=json.dumps(CLAUDE["Stop"]).encode(),
                   env=env, capture_output=True, timeout=60, check=True)
    after = time.time()
    ts = only_event(hook).ts
    assert after - before >= 1.0
    assert before - 0.05 <= ts < before + 0.5


def test_concurrent_hooks_never_tear_lines(hook: Hook) -> None:
    import concurrent.futures

    payload: dict[str, Any] = {**CLAUDE["Stop"], "last_assistant_message": "y" * 4000}
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(pool.map(lambda _: hook.run(payload, project=hook.worktree), range(24)))
    assert all(r.returncode == 0 for r in runs)
    found = hook.events()
    assert len(found) == 24
    assert all(isinstance(e, HookEvent) and e.hook == "Stop" for e in found)


TRANSCRIPT = Path(__file__).resolve().parent / "payloads" / (
    "claude-code-2.1.332-transcript-api-error.jsonl"
)


def test_session_end_reads_an_api_error_from_the_transcripts_end(
    hook: Hook, tmp_path: Path
) -> None:
    """A second source for a failure whose StopFailure hook was stopped before it wrote."""
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(b"x" * 100_000 + b"\n" + TRANSCRIPT.read_bytes())
    payload = {**EVERY_CLAUDE["2.1.332 / SessionEnd (other, -p)"],
               "transcript_path": str(transcript)}
    hook.run(payload, project=hook.worktree)
    event = only_event(hook)
    assert event.get("error") == "server_error"
    assert (event.get("last_assistant_message") or "").startswith("API Error: 529 Overloaded.")
    assert "transcript_path" not in json.loads(hook.lines()[0])


@pytest.mark.parametrize("ending", ["ok", "missing", "garbage"])
def test_session_end_without_a_failing_transcript_adds_nothing(
    hook: Hook, tmp_path: Path, ending: str
) -> None:
    transcript = tmp_path / "session.jsonl"
    if ending == "ok":
        lines = TRANSCRIPT.read_text().splitlines()
        ok = json.loads(lines[1])
        ok.pop("isApiErrorMessage")
        ok.pop("error")
        transcript.write_text("\n".join([lines[0], json.dumps(ok), *lines[2:]]) + "\n")
    elif ending == "garbage":
        transcript.write_bytes(b'{"type":"assistant", \xff\xfe not json\n' * 3)
    payload = {**EVERY_CLAUDE["2.1.332 / SessionEnd (other, -p)"],
               "transcript_path": str(transcript)}
    hook.run(payload, project=hook.worktree)
    event = only_event(hook)
    assert event.get("error") is None and event.get("last_assistant_message") is None
    assert hook.error_lines() == []
