"""A follow-up that did not run is never a state the coordinator has already seen: `fleet wait`
wakes for it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._cli import main
from fleet._orchestrate import start_worker
from fleet.adapters._base import Workspace
from fleet.adapters.headless import HeadlessAdapter
from tests.conftest import Repo

from .conftest import FakeAgent
from .test_start import brief, exited


def test_a_follow_up_whose_agent_cannot_start_wakes_wait(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"result": "what next?", "session": "sess-7"}])
    state = start_worker("talk", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "talk")
    with Fleet(home) as fleet:
        first = fleet.state("talk")
        fleet.seen(first.mark)
        assert fleet.poll(["talk"]).attention == ()
    (fake.bin / "claude").unlink()  # the next run's agent cannot be executed: exit 127
    follow = tmp_path / "follow.md"
    follow.write_text("Now write the docs.")
    ws = Workspace(worktree=Path(state.worktree or ""), branch="fleet/talk",
                   handle={"worker": "talk"})
    HeadlessAdapter(options=fake.options()).send(ws, follow)
    with Fleet(home) as fleet:
        woke = fleet.wait(["talk"], timeout=30)
    assert not woke.timed_out
    (after,) = woke.attention
    assert after.state == "gone" and after.mark != first.mark
    assert after.exit is not None and after.exit.exit_code == 127


def test_a_policy_reaches_the_agents_command_line_and_its_record(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    from fleet._permissions import PermissionPolicy

    policy = PermissionPolicy(mode="dontAsk", allowed_tools=("Write", "Bash(git:*)"),
                              disallowed_tools=("WebFetch",), add_dirs=(str(tmp_path),))
    start_worker("ruled", task=brief(tmp_path), repo=repo.path, options=fake.options(),
                 policy=policy)
    exited(home, "ruled")
    argv = fake.calls()[0]["argv"]
    pairs = list(itertools.pairwise(argv))
    assert ("--permission-mode", "dontAsk") in pairs
    assert "--allowedTools=Write" in argv and "--allowedTools=Bash(git:*)" in argv
    assert "--disallowedTools=WebFetch" in argv and f"--add-dir={tmp_path}" in argv
    assert argv[-1] == "# Fix the bug\nMake the tests pass.\n"  # the prompt, not a rule
    record = HeadlessAdapter(options=fake.options()).record("ruled")
    assert record.allowed_tools == ("Write", "Bash(git:*)")  # a follow-up runs with the same


def test_send_with_a_receipt_says_a_follow_up_was_not_taken_and_why(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake.plan([{"result": "what next?", "session": "sess-8"}])
    start_worker("rcpt", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "rcpt")
    (fake.bin / "claude").unlink()  # the follow-up's agent cannot be executed: exit 127
    follow = tmp_path / "follow.md"
    follow.write_text("Now write the docs.")
    capsys.readouterr()

    code = main(["--home", str(home), "send", "rcpt", str(follow), "--receipt", "30", "--json"])

    out = json.loads(capsys.readouterr().out)
    assert code == 4
    assert out["receipt"]["taken"] is False and out["receipt"]["state"] == "gone"
    assert "cannot start" in out["receipt"]["why"]
    code = main(["--home", str(home), "send", "rcpt", str(follow), "--receipt", "30"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 4 and lines[0].startswith("sent ") and lines[1].startswith("rcpt: not taken: ")
