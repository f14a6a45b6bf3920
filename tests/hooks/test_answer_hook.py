"""The PermissionRequest hook (hooks/fleet_answer.py) and ``fleet._answer`` together: the hook
runs as Claude Code runs it (a process, the payload on stdin, the decision on stdout) and the
library answers it through the request's FIFO."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fleet._answer import (
    InvalidAnswer,
    NoRequest,
    StaleAnswer,
    answer,
    open_requests,
)
from fleet._core.events import Answered, HookEvent
from fleet._core.fold import fold
from fleet._errors import UnknownWorker
from fleet._hook_command import hook_argv
from tests.hooks.conftest import Hook, every_claude_payload

WAITING = {name: p for name, p in every_claude_payload().items()
           if p["hook_event_name"] == "PermissionRequest" and p.get("tool_name") == "Bash"}
BASH = next(iter(WAITING.values()))


class Running:
    """A hook process waiting on its request."""

    def __init__(self, hook: Hook, payload: Mapping[str, Any], env: Mapping[str, str]) -> None:
        full_env = {"PATH": "/usr/bin:/bin", "FLEET_HOME": str(hook.home),
                    "CLAUDE_PROJECT_DIR": str(hook.worktree), **env}
        self.proc = subprocess.Popen(hook_argv("claude", home=hook.home), env=full_env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(payload).encode())
        self.proc.stdin.close()
        self.proc.stdin = None  # communicate() must not flush it again

    def result(self, timeout: float = 30) -> tuple[int, bytes, bytes]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def decision(self) -> dict[str, Any]:
        code, out, err = self.result()
        assert (code, err) == (0, b"")
        data: dict[str, Any] = json.loads(out)
        assert data["hookSpecificOutput"]["hookEventName"] == "PermissionRequest"
        decision: dict[str, Any] = data["hookSpecificOutput"]["decision"]
        return decision


@pytest.fixture
def started(hook: Hook) -> Iterator[list[Running]]:
    runs: list[Running] = []
    yield runs
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
        run.proc.communicate()  # reaps it and closes its pipes


def ask(hook: Hook, started: list[Running], payload: Mapping[str, Any] = BASH,
        **env: str) -> str:
    """Start the hook on ``payload`` and return its request id once it waits."""
    before = len(open_requests(hook.home, "w1")) if hook.journal.exists() else 0
    run = Running(hook, payload, {"FLEET_ANSWER_TIMEOUT": "60", **env})
    started.append(run)
    deadline = time.monotonic() + 30
    while True:
        waiting = open_requests(hook.home, "w1") if hook.journal.exists() else []
        if len(waiting) > before:
            return waiting[-1].request
        assert run.proc.poll() is None, run.result()
        assert time.monotonic() < deadline, "the hook never opened its request"
        time.sleep(0.01)


def answers(hook: Hook) -> list[Answered]:
    return [e for e in hook.events() if isinstance(e, Answered)]


@pytest.mark.parametrize("name", sorted(WAITING))
def test_a_real_request_is_journaled_and_allowed(hook: Hook, started: list[Running],
                                                 name: str) -> None:
    payload = WAITING[name]
    request = ask(hook, started, payload)

    (event,) = [e for e in hook.events() if isinstance(e, HookEvent)]
    assert event.hook == "PermissionRequest" and event.get("request") == request
    assert event.get("detail")["command"] == payload["tool_input"]["command"]
    state = fold("w1", hook.events(), now=time.time())
    assert (state.state, state.reason, state.permission_request) == (
        "blocked", "permission", request)

    result = answer(hook.home, "w1", "allow", by="cli:tester@here")

    assert started[0].decision() == {"behavior": "allow"}
    assert (result.request, result.decision, result.tool) == (request, "allow", "Bash")
    (given,) = answers(hook)
    assert (given.request, given.decision, given.by) == (request, "allow", "cli:tester@here")
    assert fold("w1", hook.events(), now=time.time()).permission_request is None
    assert list((hook.home / "workers" / "w1" / "requests").iterdir()) == []


def test_deny_carries_the_reason_to_the_model(hook: Hook, started: list[Running]) -> None:
    ask(hook, started)

    answer(hook.home, "w1", "deny", by="x", reason="not\non main\x07")

    assert started[0].decision() == {"behavior": "deny", "message": "not on main"}
    (given,) = answers(hook)
    assert given.reason == "not on main"


def test_a_stale_answer_is_refused(hook: Hook, started: list[Running]) -> None:
    request = ask(hook, started)
    answer(hook.home, "w1", "allow", by="first")
    started[0].result()

    with pytest.raises(StaleAnswer, match="already answered \\(allow by first\\)"):
        answer(hook.home, "w1", "deny", by="second", request=request)
    with pytest.raises(NoRequest, match="w1 has no open permission request"):
        answer(hook.home, "w1", "deny", by="second")
    with pytest.raises(NoRequest, match="no permission request 0123456789abcdef"):
        answer(hook.home, "w1", "deny", by="second", request="0123456789abcdef")
    assert [a.by for a in answers(hook)] == ["first"]


def test_a_request_whose_hook_died_is_refused(hook: Hook, started: list[Running]) -> None:
    request = ask(hook, started)
    started[0].proc.kill()
    started[0].proc.communicate()

    assert open_requests(hook.home, "w1") == []
    with pytest.raises(StaleAnswer, match="no longer waiting"):
        answer(hook.home, "w1", "allow", by="x", request=request)
    assert answers(hook) == []
    # What the killed hook left behind is cleared by the refused answer.
    assert list((hook.home / "workers" / "w1" / "requests").iterdir()) == []


def test_bad_answers_are_refused_before_anything_is_written(hook: Hook,
                                                             started: list[Running]) -> None:
    request = ask(hook, started)
    for kwargs in ({"decision": "maybe"}, {"request": "../../etc"}, {"reason": "x" * 1001}):
        with pytest.raises(InvalidAnswer):
            answer(hook.home, "w1", **{"decision": "allow", "by": "x", **kwargs})
    with pytest.raises(UnknownWorker):
        answer(hook.home, "nobody", "allow", by="x")
    assert [r.request for r in open_requests(hook.home, "w1")] == [request]
    assert answers(hook) == []


def test_two_answerers_at_once_one_wins(hook: Hook, started: list[Running]) -> None:
    ask(hook, started)
    outcomes: list[str] = []
    gate = threading.Barrier(2)

    def give(decision: str) -> None:
        gate.wait()
        try:
            answer(hook.home, "w1", decision, by=decision)
            outcomes.append("ok")
        except (StaleAnswer, NoRequest):
            outcomes.append("refused")

    threads = [threading.Thread(target=give, args=(d,)) for d in ("allow", "deny")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(outcomes) == ["ok", "refused"]
    (given,) = answers(hook)
    assert started[0].decision()["behavior"] == given.decision


def test_nobody_answers_interactive_falls_back_to_the_dialog(hook: Hook,
                                                              started: list[Running]) -> None:
    request = ask(hook, started, FLEET_ANSWER_TIMEOUT="0.3", CLAUDE_CODE_ENTRYPOINT="cli")

    assert started[0].result() == (0, b"", b"")
    (closed,) = answers(hook)
    assert (closed.request, closed.decision, closed.by, closed.reason) == (
        request, "dialog", "timeout", "no answer from the coordinator within 0.3 s")
    state = fold("w1", hook.events(), now=time.time())
    assert (state.state, state.reason, state.permission_fallback) == (
        "blocked", "permission", "dialog")
    with pytest.raises(StaleAnswer):
        answer(hook.home, "w1", "allow", by="late", request=request)


def test_nobody_answers_headless_is_denied_with_a_reason(hook: Hook,
                                                        started: list[Running]) -> None:
    ask(hook, started, FLEET_ANSWER_TIMEOUT="0.3", CLAUDE_CODE_ENTRYPOINT="sdk-cli")

    assert started[0].decision() == {
        "behavior": "deny", "message": "no answer from the coordinator within 0.3 s"}
    (closed,) = answers(hook)
    assert (closed.decision, closed.by) == ("deny", "timeout")


SECRET = "sk-live-0123456789abcdefghijklmnop"


def test_always_answers_the_same_command_inside_the_hook(hook: Hook,
                                                         started: list[Running]) -> None:
    command = f"deploy --token {SECRET}"
    shown = "deploy --token [redacted]"
    payload = {**BASH, "tool_input": {**BASH["tool_input"], "command": command}}
    ask(hook, started, payload)
    result = answer(hook.home, "w1", "allow", by="x", always=True)
    assert started[0].decision() == {"behavior": "allow"}
    assert result.always == f"Bash({shown})"
    assert "is now allowed for the rest of this session" in result.describe()

    again = Running(hook, payload, {"FLEET_ANSWER_TIMEOUT": "60"})
    started.append(again)

    assert again.decision() == {"behavior": "allow"}
    _, second = answers(hook)
    assert (second.by, second.rule, second.request) == ("rule", f"Bash({shown})", None)
    assert [e.hook for e in hook.events() if isinstance(e, HookEvent)] == ["PermissionRequest"]
    # The rule keeps a digest of the command, never the command (it may hold a secret).
    assert SECRET not in (hook.home / "workers" / "w1" / "answer-rules.jsonl").read_text()
    assert SECRET not in hook.journal.read_text()
    # Another command, or another session, is asked again.
    other = {**BASH, "tool_input": {**BASH["tool_input"], "command": "rm -rf build"}}
    ask(hook, started, other)
    ask(hook, started, {**payload, "session_id": "another-session"})
    assert len(open_requests(hook.home, "w1")) == 2


def test_the_agent_answering_its_own_dialog_releases_the_hook(hook: Hook,
                                                              started: list[Running]) -> None:
    request = ask(hook, started)
    post = {**BASH, "hook_event_name": "PostToolUse", "tool_use_id": "toolu_1",
            "tool_response": {"stdout": ""}}
    unrelated = {**post, "tool_input": {"command": "ls"}}
    hook.run(unrelated, project=hook.worktree)
    assert [r.request for r in open_requests(hook.home, "w1")] == [request]

    hook.run(post, project=hook.worktree)

    assert started[0].result() == (0, b"", b"")
    closed = answers(hook)[-1]
    assert (closed.request, closed.by, closed.decision) == (request, "agent", "withdrawn")
    with pytest.raises(StaleAnswer):
        answer(hook.home, "w1", "allow", by="late", request=request)


def test_a_question_for_the_person_is_not_held(hook: Hook) -> None:
    payload = {**BASH, "tool_name": "AskUserQuestion", "tool_input": {"questions": []}}

    run = hook.run(payload, project=hook.worktree, env={"FLEET_ANSWER_TIMEOUT": "60"},
                   timeout=10)

    assert (run.returncode, run.stdout) == (0, b"")
    (event,) = hook.events()
    assert isinstance(event, HookEvent) and event.get("request") is None
    assert not (hook.home / "workers" / "w1" / "requests").exists()


def test_a_home_where_no_fifo_can_be_made_still_journals_the_request(hook: Hook) -> None:
    requests = hook.home / "workers" / "w1" / "requests"
    requests.parent.mkdir(parents=True, exist_ok=True)
    requests.write_text("not a directory")

    run = hook.run(BASH, project=hook.worktree, env={"FLEET_ANSWER_TIMEOUT": "60"}, timeout=10)

    assert (run.returncode, run.stdout) == (0, b"")
    (event,) = hook.events()
    assert isinstance(event, HookEvent) and event.hook == "PermissionRequest"
    assert "cannot wait for an answer" in hook.error_lines()[0]["error"]


def test_request_ids_in_a_journal_are_checked(hook: Hook, tmp_path: Path) -> None:
    """A journal line naming a request id fleet never made (a path, say) is not a request."""
    hook.journal.parent.mkdir(parents=True, exist_ok=True)
    with hook.journal.open("a") as f:
        f.write(json.dumps({"v": 1, "ts": 1.0, "src": "claude", "type": "PermissionRequest",
                            "tool_name": "Bash", "request": "../../../tmp/x"}) + "\n")
    assert open_requests(hook.home, "w1") == []
