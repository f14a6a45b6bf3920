"""``fleet mcp serve`` over stdio, driven frame by frame: the tools and their JSON (the CLI's,
byte for byte), one-line tool errors that never end the server, the bounded wait, what the
server acts on, keys kept out of results, resources, the prompt, and pushed wake-ups."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fleet import Fleet, HookEvent
from tests.conftest import Repo, git, make_repo

from ._client import FLEET, McpClient, fleet_json, serving

DONE = "Done.\nFLEET_WORKER_DONE: added notes"


def stop(worker: str, message: str = "") -> None:
    data = {"last_assistant_message": message} if message else {}
    with Fleet() as fleet:
        fleet.record(worker, HookEvent(ts=time.time(), src="claude", hook="Stop", data=data))


def worktree(repo: Repo, name: str, *, push: bool = True) -> Path:
    """A linked worktree on branch fleet/NAME with one commit, pushed (or not), registered."""
    path = repo.path.parent / f"{repo.path.name}.fleet" / name
    repo.git("worktree", "add", "-q", "-b", f"fleet/{name}", str(path), "main")
    (path / "notes.txt").write_text("notes\n")
    git(path, "add", "notes.txt")
    git(path, "commit", "-q", "-m", "add notes")
    if push:
        git(path, "push", "-q", "-u", "origin", "HEAD")
    subprocess.run([*FLEET, "register", name, "--worktree", str(path), "--branch",
                    f"fleet/{name}", "--base", "main", "--tool", "claude"], check=True,
                   capture_output=True)
    return path


def test_the_handshake_and_the_tools(repo: Repo) -> None:
    mcp = McpClient(["--repo", str(repo.path)])
    try:
        # A 2026-07-28 client's probe is answered "method not found", so it falls back.
        probe = mcp.request("server/discover", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
        assert probe["error"]["code"] == -32601
        init = mcp.initialize()
        assert init["protocolVersion"] == "2025-11-25"
        assert init["capabilities"]["experimental"] == {"claude/channel": {}}
        assert "wait" in init["instructions"]
        tools = mcp.request("tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == [
            "plan", "profiles", "start", "status", "wait", "seen", "answer", "send", "hand_over",
            "check", "retire", "stop", "report", "log",
        ]
        by_name = {t["name"]: t for t in tools}
        assert by_name["retire"]["annotations"]["destructiveHint"] is True
        assert by_name["status"]["annotations"]["readOnlyHint"] is True
        assert by_name["start"]["inputSchema"]["required"] == ["worker"]
        assert by_name["start"]["inputSchema"]["additionalProperties"] is False
    finally:
        assert mcp.close() == 0


def test_every_result_is_what_the_cli_prints(repo: Repo) -> None:
    worktree(repo, "w1")
    stop("w1", DONE)
    tasks = repo.path / "TASKS.toml"
    (repo.path / "brief.md").write_text("Add notes.\n")
    tasks.write_text('[[task]]\nname = "notes"\nbrief = "brief.md"\nprofile = "claude:work"\n')
    profiles = repo.path.parent / "profiles.json"
    profiles.write_text(json.dumps([{"name": "claude:work", "tool": "claude",
                                     "configDir": str(repo.path.parent / "cfg")}]))
    env = {"FLEET_PROFILES": str(profiles)}
    with serving(["--repo", str(repo.path)], env=env) as mcp:
        calls = [
            ("status", {}, ["status"]),
            ("status", {"workers": ["w1"], "seen": ["w1@1"]}, ["status", "w1", "--seen", "w1@1"]),
            ("log", {"worker": "w1"}, ["log", "w1"]),
            ("wait", {"workers": ["w1"], "timeout": 5}, ["wait", "w1", "--timeout", "5"]),
            ("check", {"worker": "w1", "cmds": ["test -f notes.txt"]},
             ["check", "w1", "--cmd", "test -f notes.txt"]),
            ("report", {}, ["report"]),
            ("plan", {"tasks": str(tasks)}, ["plan", str(tasks)]),
            ("profiles", {}, ["profiles"]),
        ]
        for name, arguments, argv in calls:
            got = mcp.ok(name, arguments)
            want = fleet_json(*argv, env=env)
            if name == "check":  # each check runs its commands anew
                for one in (got, want):
                    for cmd in one["commands"]:
                        cmd.pop("seconds")
            assert got == want, name
        assert mcp.ok("seen", {"marks": ["w1@1"]}) == {"seen": ["w1@1"]}
        assert mcp.ok("wait", {"workers": ["w1"], "timeout": 0.2})["result"] == "timeout"
        assert mcp.ok("log", {"worker": "w1", "last": 1})[0]["type"] == "seen"


def test_errors_are_one_line_tool_errors_and_the_server_goes_on(
    repo: Repo, tmp_path: Path
) -> None:
    other = make_repo(tmp_path / "other")
    outside = tmp_path / "brief.md"
    outside.write_text("do it\n")
    with serving(["--repo", str(repo.path)]) as mcp:
        cases = [
            ("log", {"worker": "nobody"}, "no worker 'nobody'"),
            ("log", {"worker": "../etc"}, "invalid worker id"),
            ("status", {"seen": ["garbage"]}, "invalid seen mark 'garbage'"),
            ("status", {"bogus": 1}, "status: unknown argument bogus"),
            ("wait", {"timeout": "soon"}, "timeout must be a number"),
            ("wait", {"timeout": -1}, "timeout must be 0 or more"),
            ("nosuch", {}, "unknown tool 'nosuch'"),
            ("seen", {}, "seen: marks is required"),
            ("start", {"worker": "w1", "brief": "x", "repo": str(other.path)},
             "is not one this server was told to use"),
            ("start", {"worker": "w1", "brief_file": str(outside)},
             "is outside this server's fleet home and repositories"),
            ("start", {"worker": "w1", "brief": "x", "endpoint": "http://127.0.0.1:9",
                       "key_from": "command:cat /etc/passwd"},
             "key_from command:... is not accepted from a tool"),
            ("start", {"worker": "w1"}, "give the brief's text or a brief_file"),
            ("retire", {}, "name the workers to retire, or pass --all-done"),
        ]
        for name, arguments, message in cases:
            error, text = mcp.call(name, arguments)
            assert error, (name, text)
            assert message in text and "\n" not in text, (name, text)
        assert mcp.ok("status") == []  # still serving
    workers = Path(os.environ["FLEET_HOME"]) / "workers"
    assert not workers.exists() or not list(workers.iterdir())  # nothing was started


def test_a_worker_outside_the_repositories_is_not_acted_on(repo: Repo, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other")
    worktree(other, "far")
    stop("far", DONE)
    with serving(["--repo", str(repo.path)]) as mcp:
        for name, arguments in [("check", {"worker": "far"}), ("retire", {"workers": ["far"]}),
                                ("retire", {"all_done": True}),
                                ("send", {"worker": "far", "text": "hi"}),
                                ("stop", {"worker": "far"}),
                                ("hand_over", {"worker": "far", "model": "m"})]:
            error, text = mcp.call(name, arguments)
            assert error and "worker far is not in a repository this server was told" in text
        # reading is not acting: status, log and report see every worker of the fleet home
        assert [s["worker"] for s in mcp.ok("status")] == ["far"]
    assert [e["type"] for e in fleet_json("log", "far")] == ["registered", "Stop"]


def test_the_repository_it_is_started_in_is_the_default(repo: Repo) -> None:
    with serving([], cwd=repo.path) as mcp:
        error, text = mcp.call("start", {"worker": "w1", "brief": "x", "repo": "/"})
        assert error and f"this server acts on {os.path.realpath(repo.path)}" in text


def test_wait_returns_as_soon_as_a_worker_needs_attention(repo: Repo) -> None:
    worktree(repo, "w1")
    with serving(["--repo", str(repo.path)]) as mcp:
        threading.Timer(1.0, stop, args=("w1", DONE)).start()
        started = time.monotonic()
        woke = mcp.ok("wait", {"timeout": 30})
        took = time.monotonic() - started
    assert woke["result"] == "attention" and woke["seen_hint"] == ["w1@1"]
    assert woke["attention"][0]["state"] == "done"
    assert 0.9 < took < 15


def test_wait_never_blocks_past_the_servers_limit(repo: Repo) -> None:
    worktree(repo, "w1")
    with serving(["--repo", str(repo.path), "--max-wait", "1"]) as mcp:
        started = time.monotonic()
        woke = mcp.ok("wait", {"timeout": 600})
        assert time.monotonic() - started < 10
        assert woke == {"result": "timeout", "attention": [], "seen_hint": []}


def test_a_cancelled_wait_ends_its_process(repo: Repo) -> None:
    worktree(repo, "w1")
    with serving(["--repo", str(repo.path), "--max-wait", "120"]) as mcp:
        mcp.send({"id": "long", "method": "tools/call",
                  "params": {"name": "wait", "arguments": {"timeout": 120}}})
        deadline = time.monotonic() + 30
        while not waits(mcp.proc.pid):
            assert time.monotonic() < deadline, "the wait never started"
            time.sleep(0.05)
        mcp.send({"method": "notifications/cancelled", "params": {"requestId": "long"}})
        while waits(mcp.proc.pid):
            assert time.monotonic() < deadline, "the cancelled wait kept running"
            time.sleep(0.05)
        assert mcp.ok("status")[0]["worker"] == "w1"


def waits(server_pid: int) -> bool:
    """Whether a `fleet wait` child of the server runs."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if int(fields[1]) == server_pid and b"wait" in cmdline:
            return True
    return False


def test_retire_in_ask_mode_needs_confirm(repo: Repo, tmp_path: Path) -> None:
    path = worktree(repo, "w1")
    stop("w1", DONE)
    settings = tmp_path / "fleet.json"
    settings.write_text('{"retire": "ask"}')
    with serving(["--repo", str(repo.path)], env={"FLEET_SETTINGS": str(settings)}) as mcp:
        assert mcp.ok("check", {"worker": "w1"})["verdict"] == "checked"
        asked = mcp.ok("retire", {"workers": ["w1"]})
        assert asked["mode"] == "ask"
        [kept] = asked["outcomes"]
        assert (kept["worker"], kept["retired"]) == ("w1", False)
        assert kept["reason"].startswith("not confirmed")
        assert path.exists()
        done = mcp.ok("retire", {"workers": ["w1"], "confirm": True})
        assert [(o["worker"], o["retired"]) for o in done["outcomes"]] == [("w1", True)]
        assert not path.exists()
        [line] = mcp.ok("report")
        assert (line["worker"], line["verdict"], line["outcome"]) == ("w1", "checked", "retired")


def test_a_follow_up_given_as_text_is_sent_from_a_file(repo: Repo) -> None:
    worktree(repo, "w1")
    with serving(["--repo", str(repo.path)]) as mcp:
        # registered without an adapter: send says so, in one line
        error, text = mcp.call("send", {"worker": "w1", "text": "Fix the test."})
        assert error and text == "worker w1 was registered without an adapter"
    saved = list((Path(os.environ["FLEET_HOME"]) / "mcp" / "followups").glob("w1-*.md"))
    assert [p.read_text() for p in saved] == ["Fix the test."]
    assert oct(saved[0].stat().st_mode & 0o777) == "0o600"


def test_keys_never_appear_in_results(repo: Repo) -> None:
    key = "sk-fleet-test-key-0123456789abcdef"
    wt = worktree(repo, "w2")
    subprocess.run([*FLEET, "register", "w2", "--worktree", str(wt), "--task",
                    f"use {key} for the API"], check=True, capture_output=True)
    env = {"FLEET_TEST_KEY": key}
    with serving(["--repo", str(repo.path), "--key-from", "env:FLEET_TEST_KEY"],
                 env=env) as mcp:
        text = json.dumps(mcp.ok("log", {"worker": "w2"}))
        assert key not in text and "[redacted]" in text
        error, text = mcp.call("log", {"worker": key.replace("sk-", "")})
        assert error and key not in text


def test_resources_and_the_prompt(repo: Repo) -> None:
    worktree(repo, "w1")
    with serving(["--repo", str(repo.path)]) as mcp:
        listed = mcp.request("resources/list")["result"]["resources"]
        assert [r["uri"] for r in listed] == [
            "fleet://skill", "fleet://status", "fleet://workers/w1/journal",
        ]
        templates = mcp.request("resources/templates/list")["result"]["resourceTemplates"]
        assert templates[0]["uriTemplate"] == "fleet://workers/{worker}/journal"

        def read(uri: str) -> str:
            answer = mcp.request("resources/read", {"uri": uri})
            return answer["result"]["contents"][0]["text"]  # type: ignore[no-any-return]

        assert json.loads(read("fleet://workers/w1/journal")) == fleet_json("log", "w1")
        assert json.loads(read("fleet://status")) == fleet_json("status")
        assert "FLEET_WORKER_DONE" in read("fleet://skill")
        missing = mcp.request("resources/read", {"uri": "fleet://workers/nobody/journal"})
        assert "no worker 'nobody'" in missing["error"]["message"]
        prompt = mcp.request("prompts/get", {"name": "coordinate",
                                             "arguments": {"goal": "ship v2"}})
        text = prompt["result"]["messages"][0]["content"]["text"]
        assert "call the wait tool" in text and text.endswith("The goal: ship v2")


def test_wake_ups_are_pushed_into_a_claude_code_session_once_per_mark(repo: Repo) -> None:
    worktree(repo, "w1")
    worktree(repo, "w2")
    stop("w2", "Which file?")  # already needs attention when the session starts
    with serving(["--repo", str(repo.path)]) as mcp:
        [first] = mcp.channel()
        assert first["params"]["meta"] == {"worker": "w2", "state": "stopped",
                                           "reason": "turn_end", "mark": "w2@1"}
        stop("w1", DONE)
        pushed = mcp.channel(count=2)
        params = pushed[1]["params"]
        assert params["meta"] == {"worker": "w1", "state": "done", "reason": "claimed",
                                  "mark": "w1@1"}
        assert params["content"].startswith(
            "fleet: worker w1 needs attention: done (claimed), mark w1@1. Next: claims done: "
            "added notes")
        # a mark is pushed once, and a seen one not at all
        mcp.ok("seen", {"marks": ["w1@1"]})
        with Fleet() as fleet:
            fleet.record("w2", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
        stop("w2", "Done?")
        third = mcp.channel(count=3)
        assert third[2]["params"]["meta"]["mark"] == "w2@3"
        time.sleep(1.0)
        assert len(mcp.channel(count=4, timeout=0.5)) == 3


@pytest.mark.parametrize(("client", "push", "expected"), [
    ("codex-mcp-client", "auto", False),
    ("claude-code", "never", False),
    ("some-client", "always", True),
])
def test_who_is_pushed_to(repo: Repo, client: str, push: str, expected: bool) -> None:
    worktree(repo, "w1")
    stop("w1", DONE)
    mcp = McpClient(["--repo", str(repo.path), "--push", push])
    try:
        init = mcp.initialize(client)
        assert ("experimental" in init["capabilities"]) is (push != "never")
        assert bool(mcp.channel(timeout=3 if expected else 1.5)) is expected
    finally:
        assert mcp.close() == 0


def test_start_on_an_app_hosted_adapter(repo: Repo, tmp_path: Path) -> None:
    """herdr (the fake CLI): the worktree, the pane, the agent on its profile, the brief."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "herdr").symlink_to(Path(__file__).resolve().parents[1] / "fakes" / "herdr")
    state = tmp_path / "herdr-state.json"
    (tmp_path / "config-work").mkdir()
    snapshot = tmp_path / "profiles.json"  # a `clausona list --json` of one profile
    snapshot.write_text(json.dumps([{"name": "claude:work", "tool": "claude",
                                     "configDir": str(tmp_path / "config-work")}]))
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HERDR_FAKE_STATE": str(state),
           "FLEET_CLAUSONA": str(bin_dir / "no-clausona"), "FLEET_PROFILES": str(snapshot)}
    with serving(["--repo", str(repo.path)], env=env) as mcp:
        error, text = mcp.call("start", {"worker": "h1", "brief": "Docs.", "adapter": "herdr",
                                         "profile": "claude:nobody"})
        assert error and "claude:nobody" in text
        error, text = mcp.call("start", {"worker": "h1", "brief": "Docs.", "adapter": "herdr",
                                         "profile": "claude:work", "endpoint": "http://x"})
        assert error and "endpoint is for headless workers only" in text
        started = mcp.ok("start", {"worker": "h1", "brief": "Write the docs.\n",
                                   "adapter": "herdr", "profile": "claude:work",
                                   "model": "sonnet"})
        assert (started["worker"], started["adapter"], started["profile"]) == (
            "h1", "herdr", "claude:work")
        assert started["branch"] == "fleet/h1" and started["handle"]["pane"]
        [listed] = mcp.ok("status", {"workers": ["h1"]})
        assert set(listed) == set(started)  # the shape of `fleet status --json`
        assert {k: listed[k] for k in ("handle", "worktree", "branch", "base")} == {
            k: started[k] for k in ("handle", "worktree", "branch", "base")}
    calls = json.loads(state.read_text())["calls"]
    [prompt] = [c for c in calls if c[:2] == ["agent", "prompt"]]
    brief = Path(prompt[3].removeprefix("Read the brief in ").removesuffix(
        " and do what it says."))
    assert brief.read_text() == "Write the docs.\n"
    assert brief.parent == Path(os.environ["FLEET_HOME"]) / "mcp" / "briefs"


@pytest.mark.parametrize(("setting", "asked", "expected"),
                         [("ask", "auto", "ask"), ("ask", None, "ask"), ("auto", "ask", "ask")])
def test_a_tool_argument_can_only_make_the_retire_mode_stricter(
    repo: Repo, tmp_path: Path, setting: str, asked: str | None, expected: str
) -> None:
    path = worktree(repo, "w1")
    stop("w1", DONE)
    settings = tmp_path / "fleet.json"
    settings.write_text(json.dumps({"retire": setting}))
    with serving(["--repo", str(repo.path)], env={"FLEET_SETTINGS": str(settings)}) as mcp:
        assert mcp.ok("check", {"worker": "w1"})["verdict"] == "checked"
        args: dict[str, object] = {"workers": ["w1"]}
        if asked is not None:
            args["mode"] = asked
        answer = mcp.ok("retire", args)
        assert answer["mode"] == expected
        [kept] = answer["outcomes"]
        assert (kept["worker"], kept["retired"]) == ("w1", False)
        assert kept["reason"].startswith("not confirmed") and path.exists()


def test_the_mcp_directory_is_private_whatever_the_umask(repo: Repo) -> None:
    worktree(repo, "w1")
    old = os.umask(0o022)
    try:
        with serving(["--repo", str(repo.path)]) as mcp:
            mcp.call("send", {"worker": "w1", "text": "Fix the test."})
    finally:
        os.umask(old)
    home = Path(os.environ["FLEET_HOME"])
    modes = {p.name: oct(p.stat().st_mode & 0o777)
             for p in (home / "mcp", home / "mcp" / "followups")}
    assert modes == {"mcp": "0o700", "followups": "0o700"}
