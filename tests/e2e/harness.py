"""Running the real Claude Code and Codex CLIs offline, headless or in tmux, and reading what
fleet journaled about them. The fixtures in conftest.py build these objects; this module has no
pytest dependency so benchmarks can use it too.

- :class:`Processes`: every process the harness starts, each in its own process group, stopped
  (TERM, then KILL) by :meth:`Processes.stop_all`.
- :class:`ClaudeSetup`: an isolated ``CLAUDE_CONFIG_DIR`` + empty ``HOME`` with the first-run
  prompts pre-answered, bound to a :class:`FakeAnthropic`; :meth:`ClaudeSetup.headless` runs
  ``claude -p``, :meth:`ClaudeSetup.interactive` starts the TUI in a tmux pane.
- :class:`CodexSetup`: an isolated ``CODEX_HOME`` whose ``config.toml`` points at a
  :class:`FakeOpenAI`; :meth:`CodexSetup.exec` runs ``codex exec``, :meth:`CodexSetup.spawn_exec`
  starts it in the background, :meth:`CodexSetup.tui` starts the TUI in tmux.
- :class:`Tmux` / :class:`Pane`: a private tmux server (``tmux -L <unique>``), send-keys,
  capture-pane, waiting for text.
- :func:`fleet_cli`, :func:`journal`, :func:`state_sequence`, :func:`wait_for_journal`.

The environment of every agent process is built from nothing (``env -i`` style): only what is
listed in :meth:`ClaudeSetup.env` / :meth:`CodexSetup.env`, so nothing from this machine leaks in.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from fleet._core.events import Event, Exited, HookEvent, decode_line
from fleet._core.fold import WorkerState, fold

from .binaries import Agents
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI

#: Generous: the machine has 2 cores and other test runs share them.
DEFAULT_TIMEOUT = 120.0


# -- processes ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class AgentRun:
    """A finished CLI run."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def result(self) -> Any:
        """Claude's ``--output-format json`` result object (the last JSON line of stdout)."""
        for raw in reversed(self.stdout.splitlines()):
            line = raw.strip()
            if line.startswith("{"):
                return json.loads(line)
        raise ValueError(f"no JSON result in stdout: {self.stdout[-2000:]!r}")

    @property
    def events(self) -> list[Any]:
        """Codex's ``--json`` events (one JSON object per stdout line)."""
        out = []
        for line in self.stdout.splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def describe(self) -> str:
        return (f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout\n"
                f"{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}")


class Processes:
    """Starts processes in their own process groups and stops whatever is still running."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[str]] = []

    def spawn(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
              stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdin=stdin, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        self._procs.append(proc)
        return proc

    def run(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
            timeout: float = DEFAULT_TIMEOUT) -> AgentRun:
        start = time.monotonic()
        proc = self.spawn(argv, cwd=cwd, env=env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(proc)
            out, err = proc.communicate()
            raise TimeoutError(
                f"{argv[0]} did not finish in {timeout}s\n--- stdout\n{out[-3000:]}\n"
                f"--- stderr\n{err[-3000:]}"
            ) from None
        return AgentRun(argv=tuple(argv), returncode=proc.returncode, stdout=out, stderr=err,
                        seconds=time.monotonic() - start)

    @staticmethod
    def stop(proc: subprocess.Popen[str], grace: float = 5.0) -> None:
        """TERM the process group, then KILL it."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace)
        # Children that outlived their leader (hooks, tool commands) go too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for proc in self._procs:
            self.stop(proc)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self._procs.clear()


# -- tmux -----------------------------------------------------------------------------------


class Tmux:
    """A private tmux server. Every pane runs its command under ``env -i`` with exactly the
    environment given. :meth:`kill` ends the server and whatever still runs in it."""

    def __init__(self, root: Path) -> None:
        self.socket = f"fleet-e2e-{uuid.uuid4().hex[:12]}"
        self.root = root
        self.conf = root / "tmux.conf"
        root.mkdir(parents=True, exist_ok=True)
        # remain-on-exit keeps a finished pane's last screen readable; a big history helps
        # when a test fails and prints the screen.
        self.conf.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n"
                             "set -g status off\n")
        self._pids: list[int] = []
        self._started = False

    def tmux(self, *args: str, check: bool = True) -> str:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.root),
               "TERM": "xterm-256color", "LANG": "C.UTF-8"}
        out = subprocess.run(["tmux", "-L", self.socket, "-f", str(self.conf), *args],
                             capture_output=True, text=True, env=env, check=False, timeout=30)
        if check and out.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def start(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
              width: int = 160, height: int = 50) -> Pane:
        """Start ``argv`` in a new window (a new session the first time)."""
        env = {"TERM": "xterm-256color", "COLORTERM": "truecolor", **env}
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
        name = f"w{len(self._pids)}"
        if not self._started:
            self.tmux("new-session", "-d", "-s", "e2e", "-n", name, "-x", str(width),
                      "-y", str(height), "-c", str(cwd), shlex.join(command))
            self._started = True
        else:
            self.tmux("new-window", "-d", "-t", "e2e", "-n", name, "-c", str(cwd),
                      shlex.join(command))
        target = f"e2e:{name}"
        pid = int(self.tmux("display-message", "-p", "-t", target, "#{pane_pid}").strip())
        self._pids.append(pid)
        return Pane(self, target, pid)

    def kill(self) -> None:
        if self._started:
            self.tmux("kill-server", check=False)
        deadline = time.monotonic() + 5
        for pid in self._pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self._pids.clear()
        self._started = False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of the tmux server that nobody reaped yet counts as gone.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


@attrs.define
class Pane:
    """One tmux pane running an agent."""

    tmux: Tmux
    target: str
    pid: int

    def send(self, *keys: str) -> None:
        """tmux key names: ``"Enter"``, ``"Escape"``, ``"C-c"``, ``"Down"`` ..."""
        self.tmux.tmux("send-keys", "-t", self.target, *keys)

    def type(self, text: str) -> None:
        """Type text literally (no key-name lookup)."""
        self.tmux.tmux("send-keys", "-t", self.target, "-l", text)

    def screen(self) -> str:
        return self.tmux.tmux("capture-pane", "-p", "-t", self.target)

    def dead(self) -> bool:
        out = self.tmux.tmux("display-message", "-p", "-t", self.target, "#{pane_dead}",
                             check=False)
        return out.strip() == "1"

    def wait_for(self, pattern: str | re.Pattern[str], *, timeout: float = 30,
                 interval: float = 0.05) -> str:
        """Wait until the screen matches ``pattern`` (a regex); return the screen."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if rx.search(screen):
                return screen
            time.sleep(interval)
        raise TimeoutError(f"screen never matched {rx.pattern!r} in {timeout}s:\n{screen}")


# -- agent setups ---------------------------------------------------------------------------


def _base_env(agents: Agents, home: Path) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "PATH": agents.path_env(),
        "LANG": "C.UTF-8",
        "SHELL": "/bin/bash",
        "TMPDIR": str(home / "tmp"),
    }
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    # The suite's hermetic fleet home and git identity (tests/conftest.py) carry over.
    for name in ("FLEET_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):
        value = os.environ.get(name)
        if value:
            env[name] = value
    return env


@attrs.define
class ClaudeSetup:
    """An isolated Claude Code installation: config dir, empty home, fake server, key."""

    agents: Agents
    server: FakeAnthropic
    config_dir: Path
    home: Path
    processes: Processes
    api_key: str = "sk-ant-fleet-e2e-0000000000000000-key"
    #: a subscription's OAuth token (``subscription=True`` runs use it instead of the API key:
    #: Claude Code then words usage limits as a subscriber sees them, with the reset time)
    oauth_token: str = "sk-ant-oat01-fleet-e2e-subscription-0000000000"
    #: extra variables for every run (e.g. FLEET_WORKER)
    extra_env: dict[str, str] = attrs.field(factory=dict)

    def prepare(self) -> ClaudeSetup:
        """Pre-answer the first-run prompts: onboarding, the custom API key, and (in
        settings.json) the bypass-permissions warning."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        state = self.state_file
        if not state.exists():
            state.write_text(json.dumps({
                "hasCompletedOnboarding": True,
                "lastOnboardingVersion": self.agents.claude_version,
                "projects": {},
                "customApiKeyResponses": {"approved": [self.api_key[-20:]], "rejected": []},
            }, indent=2))
        if not self.settings_file.exists():
            self.settings_file.write_text(
                json.dumps({"skipDangerousModePermissionPrompt": True}, indent=2))
        return self

    @property
    def state_file(self) -> Path:
        return self.config_dir / ".claude.json"

    @property
    def settings_file(self) -> Path:
        return self.config_dir / "settings.json"

    def settings(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.settings_file.read_text())
        return data

    def trust(self, project: Path, **extra: Any) -> None:
        """Accept the folder-trust dialog for ``project`` (and set other ``.claude.json``
        keys given as keyword arguments, e.g. ``messageIdleNotifThresholdMs=3000``)."""
        data = json.loads(self.state_file.read_text())
        entry = data.setdefault("projects", {}).setdefault(str(project.resolve()), {})
        entry["hasTrustDialogAccepted"] = True
        data.update(extra)
        self.state_file.write_text(json.dumps(data, indent=2))

    def env(self, **more: str) -> dict[str, str]:
        env = _base_env(self.agents, self.home)
        env.update({
            "CLAUDE_CONFIG_DIR": str(self.config_dir),
            "ANTHROPIC_BASE_URL": self.server.url,
            "ANTHROPIC_API_KEY": self.api_key,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "IS_SANDBOX": "1",
        })
        env.update(self.extra_env)
        env.update(more)
        return env

    def subscription_env(self, **more: str) -> dict[str, str]:
        """:meth:`env` logged in as a subscriber (an OAuth token, no API key)."""
        env = self.env(**more)
        del env["ANTHROPIC_API_KEY"]
        env["CLAUDE_CODE_OAUTH_TOKEN"] = self.oauth_token
        return env

    def headless_argv(self, prompt: str, *, permission_mode: str = "bypassPermissions",
                      args: Sequence[str] = ()) -> list[str]:
        return [str(self.agents.claude), "-p", prompt, "--output-format", "json",
                "--permission-mode", permission_mode, *args]

    def headless(self, prompt: str, *, cwd: Path, permission_mode: str = "bypassPermissions",
                 args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, subscription: bool = False) -> AgentRun:
        """Run ``claude -p PROMPT --output-format json`` to completion."""
        make_env = self.subscription_env if subscription else self.env
        return self.processes.run(
            self.headless_argv(prompt, permission_mode=permission_mode, args=args),
            cwd=cwd, env=make_env(**dict(env or {})), timeout=timeout,
        )

    def interactive(self, tmux: Tmux, *, cwd: Path, prompt: str | None = None,
                    permission_mode: str | None = None, args: Sequence[str] = (),
                    env: Mapping[str, str] | None = None, trust: bool = True,
                    subscription: bool = False) -> Pane:
        """Start the TUI in a tmux pane (trusting ``cwd`` first unless ``trust`` is false).
        With ``prompt`` it is submitted at once; ``permission_mode`` None starts it in the
        release's default mode."""
        if trust:
            self.trust(cwd)
        argv = [str(self.agents.claude)]
        if permission_mode:
            argv += ["--permission-mode", permission_mode]
        argv += list(args)
        if prompt is not None:
            argv += ["--", prompt] if args else [prompt]
        make_env = self.subscription_env if subscription else self.env
        return tmux.start(argv, cwd=cwd, env=make_env(**dict(env or {})))


@attrs.define
class CodexSetup:
    """An isolated Codex home whose config points at a :class:`FakeOpenAI`."""

    agents: Agents
    server: FakeOpenAI
    codex_home: Path
    home: Path
    processes: Processes
    api_key: str = "sk-fleet-e2e-codex-key"
    extra_env: dict[str, str] = attrs.field(factory=dict)

    @property
    def config_file(self) -> Path:
        return self.codex_home / "config.toml"

    def prepare(self, extra_config: str = "") -> CodexSetup:
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.config_file.exists():
            self.config_file.write_text(
                'model = "fake-model"\n'
                'model_provider = "fake"\n'
                'approval_policy = "never"\n'
                'sandbox_mode = "danger-full-access"\n'
                "check_for_update_on_startup = false\n"
                f"{extra_config}"
                "\n[features]\n"
                "daemon_auto_start = false\n"
                "\n[model_providers.fake]\n"
                'name = "Fake"\n'
                f'base_url = "{self.server.url}/v1"\n'
                'env_key = "FAKE_OPENAI_API_KEY"\n'
                'wire_api = "responses"\n'
                "request_max_retries = 0\n"
                "stream_max_retries = 0\n"
            )
        return self

    def trust(self, project: Path) -> None:
        """Answer "Trust this folder?" for ``project`` (appends a TOML table)."""
        key = json.dumps(str(project.resolve()))
        text = self.config_file.read_text()
        if f"[projects.{key}]" not in text:
            self.config_file.write_text(
                text.rstrip("\n") + f'\n\n[projects.{key}]\ntrust_level = "trusted"\n')

    def env(self, **more: str) -> dict[str, str]:
        env = _base_env(self.agents, self.home)
        env.update({
            "CODEX_HOME": str(self.codex_home),
            "FAKE_OPENAI_API_KEY": self.api_key,
            "NO_COLOR": "1",
        })
        env.update(self.extra_env)
        env.update(more)
        return env

    def exec_argv(self, prompt: str, args: Sequence[str] = ()) -> list[str]:
        return [str(self.agents.codex), "exec", "--json", "--disable",
                "unbounded_connection_retries", *args, prompt]

    def exec(self, prompt: str, *, cwd: Path, args: Sequence[str] = (),
             env: Mapping[str, str] | None = None,
             timeout: float = DEFAULT_TIMEOUT) -> AgentRun:
        """Run ``codex exec --json PROMPT`` to completion."""
        return self.processes.run(self.exec_argv(prompt, args), cwd=cwd,
                                  env=self.env(**dict(env or {})), timeout=timeout)

    def spawn_exec(self, prompt: str, *, cwd: Path, args: Sequence[str] = (),
                   env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
        """Start ``codex exec`` in the background (e.g. to interrupt it)."""
        return self.processes.spawn(self.exec_argv(prompt, args), cwd=cwd,
                                    env=self.env(**dict(env or {})))

    def tui(self, tmux: Tmux, *, cwd: Path, prompt: str | None = None,
            args: Sequence[str] = (), env: Mapping[str, str] | None = None,
            trust: bool = True) -> Pane:
        """Start the Codex TUI in a tmux pane (trusting ``cwd`` first unless ``trust`` is
        false, e.g. when the test has ``fleet trust`` do it)."""
        if trust:
            self.trust(cwd)
        argv = [str(self.agents.codex), *args]
        if prompt is not None:
            argv.append(prompt)
        return tmux.start(argv, cwd=cwd, env=self.env(**dict(env or {})))


# -- fleet ----------------------------------------------------------------------------------


def fleet_argv() -> list[str]:
    """How to run this checkout's ``fleet`` command."""
    exe = Path(sys.executable).with_name("fleet")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from fleet._cli import main; sys.exit(main())"]


def fleet_cli(*args: str, check: bool = True, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``fleet ARGS`` as a subprocess in the test's environment (its FLEET_HOME)."""
    out = subprocess.run([*fleet_argv(), *args], capture_output=True, text=True, check=False,
                         env={**os.environ, **dict(env or {})}, cwd=cwd, timeout=60)
    if check and out.returncode != 0:
        raise AssertionError(f"fleet {' '.join(args)} exited {out.returncode}:\n"
                             f"{out.stdout}\n{out.stderr}")
    return out


def fleet_home() -> Path:
    return Path(os.environ["FLEET_HOME"])


def journal_file(worker: str, home: Path | None = None) -> Path:
    return (home or fleet_home()) / "workers" / worker / "journal.jsonl"


def journal(worker: str, home: Path | None = None) -> list[Event]:
    """The worker's journal, decoded (complete lines only); [] when there is none."""
    path = journal_file(worker, home)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [decode_line(line) for line in data.split(b"\n")[:-1]]


def hooks_of(events: Iterable[Event]) -> list[str]:
    """The hook names, in journal order."""
    return [e.hook for e in events if isinstance(e, HookEvent) and e.src != "stream"]


def state_sequence(worker: str, events: Sequence[Event]) -> list[tuple[str, str]]:
    """The (state, reason) changes, folding each prefix of the journal with the real fold
    (``now`` = the prefix's last event, so nothing reads as quiet)."""
    seq: list[tuple[str, str]] = []
    for n in range(1, len(events) + 1):
        now = events[n - 1].ts or 0.0
        s = fold(worker, events[:n], now=now)
        pair = (s.state, s.reason)
        if not seq or seq[-1] != pair:
            seq.append(pair)
    return seq


@attrs.frozen(kw_only=True)
class Sighting:
    """When a screen first showed something and when the fold first agreed."""

    screen_at: float
    state_at: float
    state: WorkerState

    @property
    def lag(self) -> float:
        """Seconds from the screen to the state (negative: the state came first)."""
        return self.state_at - self.screen_at


def watch_screen_and_state(pane: Pane, worker: str, screen: str,
                           wanted: Callable[[WorkerState], bool], *,
                           timeout: float = 60) -> Sighting:
    """Watch the pane and the fold of ``worker``'s journal together until the screen has
    matched ``screen`` (a regex) and the state has satisfied ``wanted``, each at least once."""
    rx = re.compile(screen)
    deadline = time.monotonic() + timeout
    screen_at: float | None = None
    state_at: float | None = None
    state: WorkerState | None = None
    while screen_at is None or state_at is None:
        if time.monotonic() > deadline:
            current = fold(worker, journal(worker), now=time.time())
            raise TimeoutError(
                f"screen {'seen' if screen_at else 'never matched ' + screen!r}, state "
                f"{'seen' if state_at else 'never reached'} (now {current.state}/"
                f"{current.reason}) in {timeout}s; hooks: {hooks_of(journal(worker))}\n"
                f"{pane.screen()}"
            )
        if screen_at is None and rx.search(pane.screen()):
            screen_at = time.monotonic()
        if state_at is None:
            current = fold(worker, journal(worker), now=time.time())
            if wanted(current):
                state_at, state = time.monotonic(), current
        time.sleep(0.02)
    assert state is not None
    return Sighting(screen_at=screen_at, state_at=state_at, state=state)


def wait_for_state(worker: str, wanted: Callable[[WorkerState], bool], *,
                   timeout: float = 60) -> WorkerState:
    """Poll the fold of ``worker``'s journal until ``wanted(state)``."""
    deadline = time.monotonic() + timeout
    while True:
        state = fold(worker, journal(worker), now=time.time())
        if wanted(state):
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"{worker} is {state.state}/{state.reason} after {timeout}s; "
                               f"hooks: {hooks_of(journal(worker))}")
        time.sleep(0.02)


def wait_for_journal(worker: str, predicate: Callable[[list[Event]], bool], *,
                     timeout: float = 30, interval: float = 0.02,
                     home: Path | None = None) -> list[Event]:
    """Poll the journal until ``predicate(events)`` holds; return the events."""
    deadline = time.monotonic() + timeout
    events = journal(worker, home)
    while not predicate(events):
        if time.monotonic() > deadline:
            raise TimeoutError(f"journal of {worker} never satisfied the condition in "
                               f"{timeout}s; hooks so far: {hooks_of(events)}")
        time.sleep(interval)
        events = journal(worker, home)
    return events


def has_hook(name: str, **fields: Any) -> Callable[[list[Event]], bool]:
    """A predicate for :func:`wait_for_journal`: some ``name`` hook event with these fields."""
    def check(events: list[Event]) -> bool:
        return any(isinstance(e, HookEvent) and e.hook == name
                   and all(e.get(k) == v for k, v in fields.items()) for e in events)
    return check


def run_claude_headless(claude: ClaudeSetup, prompt: str, *, cwd: Path,
                        **kwargs: Any) -> AgentRun:
    """``claude -p PROMPT`` in ``cwd`` (see :meth:`ClaudeSetup.headless` for the options)."""
    return claude.headless(prompt, cwd=cwd, **kwargs)


def run_codex_exec(codex: CodexSetup, prompt: str, *, cwd: Path, **kwargs: Any) -> AgentRun:
    """``codex exec --json PROMPT`` in ``cwd`` (see :meth:`CodexSetup.exec`)."""
    return codex.exec(prompt, cwd=cwd, **kwargs)


def install_hooks(setup: ClaudeSetup | CodexSetup) -> None:
    """``fleet hooks install`` into the setup's config dir / Codex home (with Codex's trust
    entries), exactly as a user would."""
    if isinstance(setup, ClaudeSetup):
        fleet_cli("hooks", "install", "--config-dir", str(setup.config_dir),
                  "--claude-bin", str(setup.agents.claude))
    else:
        fleet_cli("hooks", "install", "--codex-home", str(setup.codex_home))


def register(worker: str, worktree: Path, tool: str) -> None:
    """``fleet register WORKER --worktree PATH --tool TOOL``."""
    fleet_cli("register", worker, "--worktree", str(worktree), "--tool", tool)


#: The endpoint key a headless worker test gives its workers, and the host's own subscription
#: token, which must never reach them.
KEY = "sk-fleet-e2e-worker-7d1f0c9a8b6e4d2c"
OAUTH = "sk-ant-oat01-host-subscription-token-must-not-leak"


def brief(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.md"
    path.write_text(text)
    return path


def exits(worker: str, count: int = 1, timeout: float = 120) -> list[Exited]:
    events = wait_for_journal(
        worker, lambda evs: sum(isinstance(e, Exited) for e in evs) >= count, timeout=timeout
    )
    return [e for e in events if isinstance(e, Exited)]


