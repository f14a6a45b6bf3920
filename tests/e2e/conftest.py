"""Fixtures for end-to-end tests against the real Claude Code and Codex CLIs, offline.

The CLIs are the versions pinned in ``tests/e2e/agents/<set>/package-lock.json`` (``known-good``
and ``current``), installed by ``scripts/install-agents`` (``scripts/test`` runs it) into a cache
keyed by each lock's hash; see :mod:`.binaries`. Every test that runs Claude Code runs once per
distinct pinned Claude Code version (ids ``claude-<version>``), every Codex test once per
distinct Codex version (``codex-<version>``); ``FLEET_E2E_AGENTS=latest`` runs them against what
``scripts/install-agents --latest`` installed. When the CLIs are missing every test that asks
for them FAILS with the command to run: an e2e test never skips. Mark e2e tests
``pytestmark = pytest.mark.e2e``.

Fixtures (each stops what it started; every test also has the suite's private ``FLEET_HOME``
and git identity from ``tests/conftest.py``, and ``repo``: a clone with a local bare origin):

``agents``
    :class:`.binaries.Agents` of the pin set under test: paths of ``claude``, ``codex``,
    ``node`` and their versions (``claude_version``, ``codex_version``).
``anthropic`` / ``openai``
    Running fake model servers on 127.0.0.1 (:class:`.fake_anthropic.FakeAnthropic`,
    :class:`.fake_openai.FakeOpenAI`). Give them a script of replies::

        from tests.e2e.script import bash, shell, say, error, call, calls, ToolCall
        anthropic.script([bash("true"), say("Done.\\nFLEET_WORKER_DONE: ran true")])
        openai.script([shell("ls"), say("listed")], key="task-7")  # only prompts with task-7
        anthropic.script([error(529)])                             # HTTP 529 overloaded_error

    Reply ``i`` answers the request holding ``i`` earlier model responses, so retries repeat
    it; ``delay=`` holds a reply back. ``server.requests`` records everything
    (:class:`._server.Recorded`: ``kind`` main/side/probe, ``step``, ``headers``, ``json``,
    ``api_key``); ``server.api_keys()`` lists the key of each main request;
    ``server.wait_for_requests(n)`` blocks until n arrived.
``claude``
    :class:`.harness.ClaudeSetup`: its own ``CLAUDE_CONFIG_DIR`` (onboarding, API-key approval
    and the bypass warning pre-answered) and an empty ``HOME``, bound to ``anthropic``.
    ``claude.env()`` is the complete environment of a run (also for adapters that launch claude
    themselves); ``claude.headless(prompt, cwd=...)`` runs ``claude -p ... --output-format json
    --permission-mode bypassPermissions`` and returns an :class:`.harness.AgentRun`
    (``returncode``, ``stdout``, ``stderr``, ``result`` = the parsed JSON);
    ``claude.interactive(tmux, cwd=..., prompt=...)`` starts the TUI in tmux;
    ``claude.trust(path)`` accepts the folder-trust dialog.
``codex``
    :class:`.harness.CodexSetup`: its own ``CODEX_HOME`` whose ``config.toml`` uses ``openai``
    as provider (approval never, full access, no retries, no daemon). ``codex.exec(prompt,
    cwd=...)`` runs ``codex exec --json``; ``codex.spawn_exec(...)`` starts it in the background
    (a ``Popen`` in its own process group); ``codex.tui(tmux, cwd=...)`` starts the TUI.
``tmux``
    :class:`.harness.Tmux`: a private server (``tmux -L fleet-e2e-<random>``); ``start(argv,
    cwd=, env=)`` returns a :class:`.harness.Pane` with ``send(*keys)``, ``type(text)``,
    ``screen()``, ``wait_for(regex)``. Killed (server and pane processes) at teardown.
``processes``
    :class:`.harness.Processes`: what ``claude``/``codex`` started; everything still running is
    TERMed then KILLed (by process group) at teardown. Use ``processes.spawn`` for your own.

Helpers (plain functions in :mod:`.harness`): ``run_claude_headless(claude, prompt, cwd=...)``,
``run_codex_exec(codex, prompt, cwd=...)``, ``fleet_cli(*args)`` (this checkout's ``fleet``),
``journal(worker)`` (decoded events), ``hooks_of(events)`` (hook names),
``state_sequence(worker, events)`` (the (state, reason) changes from folding each prefix),
``wait_for_journal(worker, predicate)`` with ``has_hook("Stop")`` and the like.

From outside ``tests/e2e`` (e.g. adapter tests), import the same objects from
``tests.e2e.harness`` and friends and build them yourself, or put the test under ``tests/e2e``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet._core.events import Started
from fleet._proc import is_alive

from .binaries import Agents, AgentsMissing, claude_sets, codex_sets, find_agents
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import KEY, OAUTH, ClaudeSetup, CodexSetup, Processes, Tmux, journal

_CLAUDE_FIXTURES = frozenset({"claude", "anthropic", "flaky"})
_CODEX_FIXTURES = frozenset({"codex", "openai"})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that needs the agents once per distinct version of the CLI it drives."""
    names = set(metafunc.fixturenames)
    if "agents" not in names:
        return
    wants_claude = bool(names & _CLAUDE_FIXTURES) or not names & _CODEX_FIXTURES
    wants_codex = bool(names & _CODEX_FIXTURES)
    params: dict[str, str] = {}
    if wants_claude:
        for pin_set, version in claude_sets():
            params.setdefault(pin_set, f"claude-{version}")
    if wants_codex:
        for pin_set, version in codex_sets():
            label = f"codex-{version}"
            if pin_set in params:
                params[pin_set] += f"+{label}"
            elif not wants_claude:
                params.setdefault(pin_set, label)
    metafunc.parametrize("agents", list(params), ids=list(params.values()), indirect=True)


@pytest.fixture
def agents(request: pytest.FixtureRequest) -> Agents:
    try:
        return find_agents(request.param)
    except AgentsMissing as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """Every core busy while the test runs: what a loaded machine does to the timing of hooks
    (Claude Code 2.1.332 signals a headless session's StopFailure hook milliseconds after
    spawning it; on a busy machine a hook that does not ignore the signal loses the event)."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture
def processes() -> Iterator[Processes]:
    procs = Processes()
    yield procs
    procs.stop_all()


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path / "tmux")
    yield t
    t.kill()


@pytest.fixture
def claude(
    agents: Agents, anthropic: FakeAnthropic, processes: Processes, tmp_path: Path
) -> ClaudeSetup:
    return ClaudeSetup(
        agents=agents, server=anthropic, config_dir=tmp_path / "claude-config",
        home=tmp_path / "claude-home", processes=processes,
    ).prepare()


@pytest.fixture
def codex(agents: Agents, openai: FakeOpenAI, processes: Processes, tmp_path: Path) -> CodexSetup:
    return CodexSetup(
        agents=agents, server=openai, codex_home=tmp_path / "codex-home",
        home=tmp_path / "codex-user-home", processes=processes,
    ).prepare()


@pytest.fixture(autouse=True)
def _reap_workers() -> Iterator[None]:
    """Whatever a failed test left running (supervisors, agents and their children) ends."""
    yield
    home = Path(os.environ["FLEET_HOME"])
    groups: list[tuple[int, int | None]] = []
    for sup in (home / "workers").glob("*/headless/supervisor.json"):
        with contextlib.suppress(ValueError, OSError, KeyError):
            data = json.loads(sup.read_text())
            groups.append((int(data["pid"]), data.get("start_time")))
    for path in (home / "workers").glob("*/journal.jsonl"):
        groups += [(e.pid, e.start_time) for e in journal(path.parent.name)
                   if isinstance(e, Started)]
    for pgid, start_time in groups:
        if is_alive(pgid, start_time):  # the same process, not a reused pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def host_home(tmp_path: Path) -> Path:
    """A HOME logged into a subscription: what must never reach an API worker's endpoint."""
    home = tmp_path / "host-home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True,
        "oauthAccount": {"accountUuid": "0000-host", "emailAddress": "host@example.invalid",
                         "organizationUuid": "0000-org"},
    }))
    (home / ".claude" / "settings.json").write_text(json.dumps({"forceLoginMethod": "claudeai"}))
    (home / ".claude" / ".credentials.json").write_text(json.dumps({
        "claudeAiOauth": {"accessToken": OAUTH, "refreshToken": OAUTH + "-refresh",
                          "expiresAt": 4102444800000, "scopes": ["user:inference"],
                          "subscriptionType": "max"},
    }))
    (home / "tmp").mkdir()
    return home


@pytest.fixture
def coordinator_env(agents: Agents, host_home: Path) -> dict[str, str]:
    """The coordinator's environment: the host's HOME, the agents on PATH, the key in a
    variable, and the host's own credentials (which the workers must not use)."""
    return {
        "HOME": str(host_home),
        "PATH": agents.path_env(),
        "TMPDIR": str(host_home / "tmp"),
        "IS_SANDBOX": "1",
        "FLEET_TEST_KEY": KEY,
        "ANTHROPIC_API_KEY": "sk-host-env-key-must-not-leak",
        "CLAUDE_CODE_OAUTH_TOKEN": OAUTH,
    }
