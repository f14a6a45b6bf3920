"""A follow-up that did not run is never a state the coordinator has already seen: `fleet wait`
wakes for it."""

from __future__ import annotations

from pathlib import Path

from fleet import Fleet
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
