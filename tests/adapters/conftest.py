"""Rigs for the adapter contract tests: each puts one adapter (and one build of its host) in
front of the fakes, with a runner that records every argv it ran. The headless rig runs the
scripted fake ``claude`` of tests/headless through a fake ``clausona``; each run holds until the
test lets it end (:meth:`Rig.until_idle`) and echoes its prompt as its result."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from fleet._fleet import Fleet
from fleet._proc import is_alive
from fleet._runner import Completed, SubprocessRunner
from fleet.adapters._base import LaunchSpec, Workspace
from fleet.adapters.headless import HeadlessAdapter, LaunchRecord, Pending
from fleet.adapters.herdr import HerdrAdapter
from fleet.adapters.superset import SupersetAdapter
from tests.adapters.superset_fake import FakeSupersetHost
from tests.conftest import Repo
from tests.headless.conftest import FakeAgent

FAKES = Path(__file__).resolve().parents[1] / "fakes"
SUPERSET = str(FAKES / "superset")
HERDR = str(FAKES / "herdr")
CLAUSONA = "/opt/clausona/bin/clausona"


class RecordingRunner(SubprocessRunner):
    """The real runner, remembering every argv (to prove what never reached a command line)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = 60.0,
    ) -> Completed:
        self.calls.append(tuple(argv))
        return super().run(argv, cwd=cwd, env=env, input=input, timeout=timeout)

    def argv_text(self) -> str:
        return "\n".join(" ".join(call) for call in self.calls)


@attrs.define
class Rig:
    kind: str
    adapter: SupersetAdapter | HerdrAdapter | HeadlessAdapter
    runner: RecordingRunner
    repo: Repo
    fleet: Fleet
    tmp: Path
    host: FakeSupersetHost | None = None
    agent: FakeAgent | None = None

    @property
    def runs_in(self) -> str:
        """The handle key naming what the agent runs in: a terminal, a pane, a supervised run."""
        return {"superset": "terminal", "herdr": "pane", "headless": "run"}[self.adapter.name]

    def alive(self, ws: Workspace) -> bool:
        """Whether the host reports the agent of ``ws``'s handle (that terminal, pane or run)
        as still there."""
        info = self.adapter.describe(ws)
        if self.adapter.name == "superset":
            return info["status"] != "ended"
        if self.adapter.name == "herdr":
            return info["agent_status"] != "absent"
        return bool(info["supervisor_alive"]) and str(info["supervisor_pid"]) == ws.handle.get(
            "supervisor_pid"
        )

    def until_idle(self, ws: Workspace, timeout: float = 60.0) -> None:
        """Let the worker's current turn end. An app's agent sits at its prompt already; a
        headless run is let go (its fake agent holds until told) and waited for, since a
        headless worker takes a follow-up, a hand-over or a delete only between runs."""
        if not isinstance(self.adapter, HeadlessAdapter):
            return
        assert self.agent is not None
        worker = ws.handle["worker"]
        sup = self.adapter.supervisor(worker)
        if sup is None or not self.adapter.supervisor_alive(worker):
            return
        # the fake counts agent invocations; with no failed attempt, the n-th is run n
        run = int(sup["run"])
        self.agent.wait_running(run, timeout=timeout)
        (self.agent.dir / f"go-{run}").touch()
        end = time.monotonic() + timeout
        while self.adapter.supervisor_alive(worker):
            if time.monotonic() > end:
                raise TimeoutError(f"run {run} of {worker} never ended")
            time.sleep(0.02)

    def agent_argvs(self) -> list[tuple[str, ...]]:
        """The command lines the agents were launched with: what fleet ran through its runner
        and, for headless (whose supervisor execs the agent), what the fake clausona got."""
        calls = list(self.runner.calls)
        if self.agent is not None:
            log = self.agent.dir / "clausona.jsonl"
            if log.exists():
                calls += [tuple(json.loads(line)) for line in log.read_text().splitlines()]
        return calls

    def spec(self, worker: str, brief: Path, profile: str = "claude:work") -> LaunchSpec:
        return LaunchSpec(
            worker=worker,
            brief=brief,
            profile=profile,
            model="sonnet",
            permission_mode="acceptEdits",
            config_dir=self.tmp / f"config-{profile.replace(':', '-')}",
        )

    def brief(self, text: str, name: str = "brief.md") -> Path:
        path = self.tmp / "briefs" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        return path

    def started(self, worker: str = "w1", text: str = "Write the docs.\n") -> tuple[
        Workspace, LaunchSpec
    ]:
        ws = self.adapter.create_workspace(worker, repo=self.repo.path, base="main",
                                           label="Docs · work")
        spec = self.spec(worker, self.brief(text))
        self.adapter.trust(ws, spec)
        handle = self.adapter.start(ws, spec)
        return attrs.evolve(ws, handle=dict(handle)), spec

    def herdr_state(self) -> dict[str, Any]:
        return dict(json.loads((self.tmp / "herdr" / "state.json").read_text()))


#: The adapters hosted by an app a person watches (Superset through its CLI and its host
#: service, herdr), on their newest builds: for what only an app has (its route, workspace ids,
#: the trust file its interactive agent reads, its own push guard before a forceful delete).
APP_KINDS = ["superset-cli", "superset-host", "herdr"]
#: Every adapter: the apps and headless. ALL_KINDS adds the older app builds (the 2026-08-22
#: Superset CLI without --local/--from-terminal and host without terminal.transcript, herdr
#: 0.8.0 without agent_blocked), for the tests of the verbs where builds differ: start and
#: hand-over here, and the flag and fallback tests in test_superset/test_herdr.
KINDS = [*APP_KINDS, "headless"]
ALL_KINDS = [*KINDS, "superset-cli-0822", "superset-host-0822", "herdr-0.8.0"]


def make_rig(
    kind: str, tmp: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    runner = RecordingRunner()
    fleet = Fleet()
    if kind.startswith("superset"):
        build = "0822" if kind.endswith("0822") else "1.28"
        home = tmp / "superset-home"
        monkeypatch.setenv("SUPERSET_HOME_DIR", str(home))
        monkeypatch.setenv("FAKE_SUPERSET_BUILD", build)
        monkeypatch.setenv("FAKE_SUPERSET_LOGGED_IN", "1" if "-cli" in kind else "0")
        host = FakeSupersetHost(home, build=build).start()
        try:
            host.add_project(repo.path, "demo")
            for profile in ("claude:work", "claude:side"):
                host.add_config(
                    f"Claude · {profile.split(':')[1]}",
                    CLAUSONA,
                    ["run", profile, "--", "--permission-mode", "acceptEdits", "--model",
                     "sonnet", "--strict-mcp-config"],
                )
            adapter = SupersetAdapter(runner=runner, journal=fleet.journal, superset=SUPERSET,
                                      superset_home=home)
            yield Rig(kind, adapter, runner, repo, fleet, tmp, host)
        finally:
            host.stop()
    elif kind == "headless":
        yield from _headless_rig(tmp, repo, runner, fleet)
    else:
        state = tmp / "herdr" / "state.json"
        monkeypatch.setenv("HERDR_FAKE_STATE", str(state))
        monkeypatch.setenv("FAKE_HERDR_VERSION", "0.8.0" if kind.endswith("0.8.0") else "0.8.2")
        adapter_h = HerdrAdapter(runner=runner, journal=fleet.journal, herdr=HERDR,
                                 clausona=CLAUSONA, poll=0.05)
        yield Rig(kind, adapter_h, runner, repo, fleet, tmp)


def _fake_clausona(agent: FakeAgent) -> Path:
    """``clausona run <profile> -- args``: logs its argv, then execs the profile's fake tool."""
    path = agent.bin / "clausona"
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(agent.dir / 'clausona.jsonl')!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv) + '\\n')\n"
        "if sys.argv[1:2] != ['run'] or sys.argv[3:4] != ['--']:\n"
        "    sys.exit(2)\n"
        f"tool = os.path.join({str(agent.bin)!r}, sys.argv[2].split(':')[0])\n"
        "os.execv(tool, [tool, *sys.argv[4:]])\n"
    )
    path.chmod(0o755)
    return path


class TrackedHeadless(HeadlessAdapter):
    """The headless adapter, keeping each supervisor it starts so the rig can wait for it."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.spawned: list[Pending] = []

    def _spawn(self, record: LaunchRecord, *, prompt: str, turn: int,
               resume: str | None = None) -> Pending:
        pending = super()._spawn(record, prompt=prompt, turn=turn, resume=resume)
        self.spawned.append(pending)
        return pending


def _headless_rig(tmp: Path, repo: Repo, runner: RecordingRunner, fleet: Fleet) -> Iterator[Rig]:
    root = tmp / "headless"
    root.mkdir()
    agent = FakeAgent(root)
    agent.plan([{"hold": str(agent.dir), "echo": True}])
    options = agent.options(clausona=str(_fake_clausona(agent)))
    adapter = TrackedHeadless(home=fleet.home, runner=runner, clock=fleet.clock, options=options)
    try:
        yield Rig("headless", adapter, runner, repo, fleet, tmp, agent=agent)
    finally:
        _stop_headless(adapter, agent)


def _stop_headless(adapter: TrackedHeadless, agent: FakeAgent) -> None:
    """Stop every run a test left going the way fleet stops one (its supervisor ends the agent
    and journals it), kill what is left, and wait for every supervisor."""
    for state in (adapter.home / "workers").glob("*/headless"):
        with contextlib.suppress(Exception):
            adapter.stop(state.parent.name, timeout=10)
    for pending in adapter.spawned:
        pending.abandon()  # an unreleased supervisor ends on its own
    pids = [(p.pid, p.start_time) for p in adapter.spawned]
    pids += [(c["pid"], None) for c in agent.calls()]
    for pid, start in pids:
        if is_alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    # The supervisors are no children of this process (they detach): wait until they are gone.
    end = time.monotonic() + 30
    for pending in adapter.spawned:
        while is_alive(pending.pid, pending.start_time) and time.monotonic() < end:
            time.sleep(0.02)


@pytest.fixture(params=APP_KINDS)
def rig(
    request: pytest.FixtureRequest, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    """An app-hosted adapter (Superset or herdr), newest builds."""
    yield from make_rig(request.param, tmp_path, repo, monkeypatch)


@pytest.fixture(params=KINDS)
def every_rig(
    request: pytest.FixtureRequest, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    """Every adapter, headless included, newest builds: the contract."""
    yield from make_rig(request.param, tmp_path, repo, monkeypatch)


@pytest.fixture(params=ALL_KINDS)
def any_rig(
    request: pytest.FixtureRequest, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    """Every adapter and every host build."""
    yield from make_rig(request.param, tmp_path, repo, monkeypatch)


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True,
                          text=True).stdout.strip()
