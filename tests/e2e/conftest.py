"""Fixtures for end-to-end tests against the real Claude Code and Codex CLIs, offline.

The CLIs are the versions pinned in ``tests/e2e/agents/package-lock.json``, installed by
``scripts/install-agents`` (``scripts/test`` runs it) into a cache keyed by the lock's hash; see
:mod:`.binaries`. When they are missing every test that asks for them FAILS with the command to
run: an e2e test never skips. Mark e2e tests ``pytestmark = pytest.mark.e2e``.

Fixtures (each stops what it started; every test also has the suite's private ``FLEET_HOME``
and git identity from ``tests/conftest.py``, and ``repo``: a clone with a local bare origin):

``agents``
    :class:`.binaries.Agents`: paths of ``claude``, ``codex``, ``node`` (session scope).
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

from collections.abc import Iterator
from pathlib import Path

import pytest

from .binaries import Agents, AgentsMissing, find_agents
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import ClaudeSetup, CodexSetup, Processes, Tmux


@pytest.fixture(scope="session")
def agents() -> Agents:
    try:
        return find_agents()
    except AgentsMissing as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


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
