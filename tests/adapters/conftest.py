"""Rigs for the adapter contract tests: each puts one adapter (and one build of its host) in
front of the fakes, with a runner that records every argv it ran."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from fleet._fleet import Fleet
from fleet._runner import Completed, SubprocessRunner
from fleet.adapters._base import LaunchSpec, Workspace
from fleet.adapters.herdr import HerdrAdapter
from fleet.adapters.superset import SupersetAdapter
from tests.adapters.superset_fake import FakeSupersetHost
from tests.conftest import Repo

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
    adapter: SupersetAdapter | HerdrAdapter
    runner: RecordingRunner
    repo: Repo
    fleet: Fleet
    tmp: Path
    host: FakeSupersetHost | None = None

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
        import json

        return dict(json.loads((self.tmp / "herdr" / "state.json").read_text()))


#: Every adapter on its newest host build. ALL_KINDS adds the older builds (the 2026-08-22
#: Superset CLI without --local/--from-terminal and host without terminal.transcript, herdr
#: 0.8.0 without agent_blocked), for the tests of the verbs where builds differ: start and
#: hand-over here, and the flag and fallback tests in test_superset/test_herdr.
KINDS = ["superset-cli", "superset-host", "herdr"]
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
                    ["run", profile, "--", "--model", "sonnet", "--strict-mcp-config"],
                )
            adapter = SupersetAdapter(runner=runner, fleet=fleet, superset=SUPERSET,
                                      superset_home=home)
            yield Rig(kind, adapter, runner, repo, fleet, tmp, host)
        finally:
            host.stop()
    else:
        state = tmp / "herdr" / "state.json"
        monkeypatch.setenv("HERDR_FAKE_STATE", str(state))
        monkeypatch.setenv("FAKE_HERDR_VERSION", "0.8.0" if kind.endswith("0.8.0") else "0.8.2")
        adapter_h = HerdrAdapter(runner=runner, fleet=fleet, herdr=HERDR, clausona=CLAUSONA,
                                 poll=0.05)
        yield Rig(kind, adapter_h, runner, repo, fleet, tmp)


@pytest.fixture(params=KINDS)
def rig(
    request: pytest.FixtureRequest, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    yield from make_rig(request.param, tmp_path, repo, monkeypatch)


@pytest.fixture(params=ALL_KINDS)
def any_rig(
    request: pytest.FixtureRequest, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    yield from make_rig(request.param, tmp_path, repo, monkeypatch)


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True,
                          text=True).stdout.strip()
