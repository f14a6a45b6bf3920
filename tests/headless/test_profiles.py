"""Workers on clausona profiles: routed fan-out, one-at-a-time starts per Claude profile, and
hand-over to another profile in the same worktree."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._core.events import Exited, HandedOver, Registered, Started
from fleet._orchestrate import run_tasks, start_worker, wait_started
from fleet.adapters._base import LaunchSpec, Workspace
from fleet.adapters.headless import HeadlessAdapter

from ..conftest import Repo
from .conftest import KEY, FakeAgent, wait_for


@pytest.fixture
def clausona(fake: FakeAgent) -> Path:
    """A fake ``clausona``: ``run <profile> -- args`` runs the fake tool of the profile, and
    records which profile ran in $FAKE_AGENT_DIR/profiles."""
    path = fake.bin / "clausona"
    path.write_text(
        "#!/bin/sh\n"
        '[ "$1" = run ] || exit 1\n'
        f'echo "$2" >> "{fake.dir}/profiles"\n'
        'tool="${2%%:*}"\n'
        "shift 3\n"
        f'exec "{fake.bin}/$tool" "$@"\n'
    )
    path.chmod(0o755)
    return path


def profile_json(name: str, config: Path, used: float = 10.0) -> dict[str, object]:
    window = {"usedPercent": used, "resetsAt": None}
    return {"name": name, "tool": name.partition(":")[0], "email": f"{name}@example.invalid",
            "configDir": str(config / name.replace(":", "-")), "isPrimary": False,
            "isActive": False,
            "quota": {"state": "ok", "fetchedAt": time.time() * 1000, "session": window,
                      "weekly": window}}


def first(home: Path, worker: str, kind: type) -> float:
    ts: float = wait_for(
        lambda: next((e.ts for e in Fleet(home).log(worker) if isinstance(e, kind)), None),
        what=f"{kind.__name__} of {worker}",
    )
    return ts


def test_claude_workers_on_one_profile_start_one_at_a_time(
    home: Path, repo: Repo, fake: FakeAgent, clausona: Path, tmp_path: Path
) -> None:
    fake.plan([{"sleep": 1.0, "result": "FLEET_WORKER_DONE: a"},
               {"result": "FLEET_WORKER_DONE: b"}])
    task = tmp_path / "t.md"
    task.write_text("work\n")
    opts = fake.options(clausona=str(clausona))
    start_worker("p-a", task=task, repo=repo.path, profile="claude:work", options=opts)
    start_worker("p-b", task=task, repo=repo.path, profile="claude:work", options=opts)
    # The fake agent journals nothing of its own: p-a's first event after `started` is its
    # exit, so p-b registered only after it.
    assert first(home, "p-b", Registered) >= first(home, "p-a", Exited)
    assert wait_started("p-b", home=home, timeout=30)


def test_a_profile_worker_inherits_none_of_the_coordinators_credentials(
    home: Path, repo: Repo, fake: FakeAgent, clausona: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "coordinator-profile"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "coordinator-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
    fake.plan([{"result": "FLEET_WORKER_DONE: a"}])
    task = tmp_path / "t.md"
    task.write_text("work\n")
    start_worker("cred", task=task, repo=repo.path, profile="claude:default",
                 options=fake.options(clausona=str(clausona)))
    wait_for(lambda: [e for e in Fleet(home).log("cred") if isinstance(e, Exited)])
    call = fake.calls()[0]
    assert "CLAUDE_CONFIG_DIR" not in call["env"]
    assert "ANTHROPIC_BASE_URL" not in call["env"]
    assert call["key_sha"] == {}


def test_another_profile_does_not_wait(
    home: Path, repo: Repo, fake: FakeAgent, clausona: Path, tmp_path: Path
) -> None:
    fake.plan([{"sleep": 5.0}])
    task = tmp_path / "t.md"
    task.write_text("work\n")
    opts = fake.options(clausona=str(clausona))
    start_worker("q-a", task=task, repo=repo.path, profile="claude:work", options=opts)
    start_worker("q-b", task=task, repo=repo.path, profile="claude:other", options=opts)
    assert first(home, "q-b", Registered) < first(home, "q-a", Started) + 4.0
    assert not [e for e in Fleet(home).log("q-a") if isinstance(e, Exited)]


def test_run_routes_tasks_to_profiles(
    home: Path, repo: Repo, fake: FakeAgent, clausona: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps([profile_json("claude:work", tmp_path),
                                    profile_json("claude:side", tmp_path, used=50)]))
    settings = tmp_path / "fleet.json"
    settings.write_text(json.dumps({"workers": ["claude:work", "claude:side"]}))
    monkeypatch.setenv("FLEET_PROFILES", str(profiles))
    monkeypatch.setenv("FLEET_SETTINGS", str(settings))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "coordinator"))
    fake.plan([{"result": "FLEET_WORKER_DONE: ok"}])
    (tmp_path / "a.md").write_text("a\n")
    (tmp_path / "b.md").write_text("b\n")
    tasks = tmp_path / "TASKS.toml"
    tasks.write_text(f'repo = "{repo.path}"\n'
                     '[[task]]\nname = "r-a"\nbrief = "a.md"\nprofile = "claude:side"\n'
                     '[[task]]\nname = "r-b"\nbrief = "b.md"\n')
    result = run_tasks(tasks, options=fake.options(clausona=str(clausona)))
    assert [s.worker for s in result.started] == ["r-a", "r-b"]
    assert {s.worker: s.profile for s in result.started} == {"r-a": "claude:side",
                                                             "r-b": "claude:work"}
    for w in ("r-a", "r-b"):
        wait_for(lambda w=w: [e for e in Fleet(home).log(w) if isinstance(e, Exited)])
    ran = (fake.dir / "profiles").read_text().split()
    assert sorted(ran) == ["claude:side", "claude:work"]


def test_hand_over_restarts_the_task_on_another_profile(
    home: Path, repo: Repo, fake: FakeAgent, clausona: Path, tmp_path: Path
) -> None:
    fake.plan([{"error": 429, "result": "usage limit reached|1900000000"},
               {"result": "FLEET_WORKER_DONE: finished elsewhere"}])
    task = tmp_path / "t.md"
    task.write_text("the task\n")
    opts = fake.options(clausona=str(clausona))
    state = start_worker("h-1", task=task, repo=repo.path, profile="claude:work", options=opts)
    wait_for(lambda: [e for e in Fleet(home).log("h-1") if isinstance(e, Exited)])
    assert Fleet(home).state("h-1").state == "blocked"
    adapter = HeadlessAdapter(options=opts)
    ws = Workspace(worktree=Path(state.worktree or ""), branch="fleet/h-1",
                   handle={"worker": "h-1"})
    spec = LaunchSpec(worker="h-1", brief=task, profile="claude:side")
    handle = adapter.hand_over(ws, spec)
    assert handle["run"] == "2"
    wait_for(lambda: len([e for e in Fleet(home).log("h-1") if isinstance(e, Exited)]) == 2)
    final = Fleet(home).state("h-1")
    assert (final.state, final.profile) == ("done", "claude:side")
    assert any(isinstance(e, HandedOver) for e in Fleet(home).log("h-1"))
    assert (fake.dir / "profiles").read_text().split() == ["claude:work", "claude:side"]
    assert fake.calls()[1]["cwd"] == state.worktree


def test_hand_over_from_a_profile_to_an_endpoint(
    home: Path, repo: Repo, fake: FakeAgent, clausona: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEET_TEST_KEY", KEY)
    fake.plan([{"error": 429, "result": "rate limit"}, {"result": "FLEET_WORKER_DONE: api"}])
    task = tmp_path / "t.md"
    task.write_text("the task\n")
    state = start_worker("h-2", task=task, repo=repo.path, profile="claude:work",
                         options=fake.options(clausona=str(clausona)))
    wait_for(lambda: [e for e in Fleet(home).log("h-2") if isinstance(e, Exited)])
    api = HeadlessAdapter(options=fake.options(endpoint="http://127.0.0.1:9",
                                               key_from="env:FLEET_TEST_KEY"))
    ws = Workspace(worktree=Path(state.worktree or ""), branch="fleet/h-2",
                   handle={"worker": "h-2"})
    api.hand_over(ws, LaunchSpec(worker="h-2", brief=task, model="glm-5"))
    wait_for(lambda: len([e for e in Fleet(home).log("h-2") if isinstance(e, Exited)]) == 2)
    assert Fleet(home).state("h-2").state == "done"
    second = fake.calls()[1]
    assert second["env"]["CLAUDE_CONFIG_DIR"] == str(home / "workers" / "h-2" / "config")
    assert set(second["key_sha"]) == {"ANTHROPIC_AUTH_TOKEN"}
    assert (home / "workers" / "h-2" / "config" / "settings.json").is_file()


def test_a_worker_on_a_profile_of_fleets_own_runs_without_clausona(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fleet import _profile_store

    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / "fleet.json"))
    monkeypatch.setenv("FLEET_CLAUSONA", str(tmp_path / "no-clausona"))
    monkeypatch.setenv("FLEET_CLAUDE", str(fake.bin / "claude"))
    _profile_store.add("work", config_dir=str(tmp_path / "claude-work"), model="opus")
    fake.plan([{"result": "FLEET_WORKER_DONE: a"}])
    task = tmp_path / "t.md"
    task.write_text("work\n")
    start_worker("own", task=task, repo=repo.path, profile="work", options=fake.options())
    wait_for(lambda: Fleet(home).state("own").state == "done", what="own done")
    (call,) = fake.calls()
    assert call["argv"][0] == str(fake.bin / "claude") and call["argv"][1] == "-p"
    assert call["env"]["CLAUDE_CONFIG_DIR"] == str(tmp_path / "claude-work")
