"""``fleet demo``: fleet's main job, end to end, on a fresh machine with no account and no network.

In a temporary directory it makes a repository with a local bare origin, routes three tasks to a
built-in sample of clausona profiles, and starts three *simulated* workers (threads; no model
runs). Each behaves like a Claude Code worker as fleet sees one: every step goes through fleet's
real hook program, run as the exact command ``fleet hooks command --tool claude`` prints, fed
payloads shaped like Claude Code's, with ``FLEET_WORKER`` set; and they really edit files, commit
and push. One asks for a permission; one claims done without pushing.

The coordinator loop then uses fleet's public API only: :meth:`Fleet.wait` with seen marks,
follow-ups, :func:`~fleet._check.check_worker`, :class:`~fleet._retire.Retirer` and the report.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TextIO

import attrs
import orjson

from fleet import (
    Fleet,
    ReportLine,
    Retirer,
    WorkerState,
    build_report,
    check_worker,
    format_report,
)
from fleet._cli._common import table
from fleet._hook_command import hook_command, hook_script_path, write_launcher

#: How long the whole demo may take before it gives up (it normally takes a few seconds).
DEADLINE: Final = 50.0
_GIT_ID: Final = {
    "GIT_AUTHOR_NAME": "Demo Worker",
    "GIT_AUTHOR_EMAIL": "worker@fleet.invalid",
    "GIT_COMMITTER_NAME": "Demo Worker",
    "GIT_COMMITTER_EMAIL": "worker@fleet.invalid",
    # The user's own git config (signing, hooks, templates) has no say in a throwaway demo repo.
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


@attrs.frozen(kw_only=True)
class DemoTask:
    name: str
    kind: str
    model: str | None
    brief: str
    file: str
    content: str
    check: str
    asks_permission: bool = False
    forgets_to_push: bool = False


TASKS: Final = (
    DemoTask(
        name="docs",
        kind="wide-mechanical",
        model=None,
        brief="Write docs/usage.md for the greeter.",
        file="docs/usage.md",
        content="# Usage\n\n    python3 -m greeter NAME\n\nprints a greeting for NAME.\n",
        check="grep -q greeter docs/usage.md",
    ),
    DemoTask(
        name="parser",
        kind="default",
        model="opus",
        brief="Add greeter/args.py that parses the command line; run the tests.",
        file="greeter/args.py",
        content="def parse(argv: list[str]) -> str:\n    return argv[0] if argv else 'world'\n",
        check="grep -q 'def parse' greeter/args.py",
        asks_permission=True,
    ),
    DemoTask(
        name="cli",
        kind="default",
        model="sonnet",
        brief="Add greeter/__main__.py so `python3 -m greeter NAME` greets NAME.",
        file="greeter/__main__.py",
        content=(
            "import sys\n\nfrom greeter.args import parse\n\n"
            "print(f'hello, {parse(sys.argv[1:])}')\n"
        ),
        check="test -s greeter/__main__.py",
        forgets_to_push=True,
    ),
)


@attrs.frozen(kw_only=True)
class PlannedWorker:
    task: DemoTask
    profile: str | None
    model: str | None
    reason: str


@attrs.frozen(kw_only=True)
class DemoResult:
    ok: bool
    root: str
    kept: bool
    #: The hook command the simulated workers ran (`fleet hooks command --tool claude`).
    hook: str = ""
    #: The hook program that command's launcher ran (fleet's own, from this installation).
    hook_program: str = ""
    seconds: float
    report: tuple[ReportLine, ...]
    narration: tuple[str, ...]
    problems: tuple[str, ...] = ()


#: The demo's lines fit a terminal this wide.
WIDTH: Final = 100

_COLOURS: Final = {"dim": "2", "bold": "1", "green": "32", "red": "31", "yellow": "33",
                   "cyan": "36"}
#: Words the narration colours, each as a whole word: (pattern, colour).
_PAINT: Final = (
    (re.compile(r"(?<=s\] )[a-z][a-z0-9._-]*(?=: )"), "cyan"),
    (re.compile(r"^\[ *[0-9.]+s\]"), "dim"),
    (re.compile(r"\b(checked|retired)\b"), "green"),
    (re.compile(r"\b(FAILED|refused)\b"), "red"),
    (re.compile(r"\b(permission|follow-up)\b"), "yellow"),
    (re.compile(r"^(fleet demo|Report|Next|Removed|Kept)\b"), "bold"),
)


def use_colour(out: TextIO | None, environ: Mapping[str, str] | None = None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org) or
    TERM=dumb."""
    env = os.environ if environ is None else environ
    if out is None or env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def fit(line: str, width: int = WIDTH) -> list[str]:
    """``line`` wrapped to ``width`` columns, continued under its own indent (plus two)."""
    if len(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip(" "))
    stamp = re.match(r"\[ *[0-9.]+s\] ", line)
    if stamp:
        indent = len(stamp.group(0))
    return textwrap.wrap(line, width=width, subsequent_indent=" " * (indent + 2),
                         break_on_hyphens=False) or [line[:width]]


class Narrator:
    """Lines of at most :data:`WIDTH` columns, each event stamped with the seconds since the
    demo began, in colour on a terminal."""

    def __init__(self, out: TextIO | None, start: float, *, colour: bool = False) -> None:
        self.out = out
        self.start = start
        self.colour = colour
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def paint(self, line: str) -> str:
        if not self.colour:
            return line
        for pattern, colour in _PAINT:
            line = pattern.sub(f"\x1b[{_COLOURS[colour]}m\\g<0>\x1b[0m", line)
        return line

    def _write(self, lines: list[str]) -> None:
        fitted = [piece for line in lines for piece in fit(line)]
        with self.lock:
            self.lines.extend(fitted)
            if self.out is not None:
                self.out.write("".join(self.paint(ln) + "\n" for ln in fitted))
                self.out.flush()

    def say(self, text: str, *detail: str) -> None:
        stamp = f"[{time.monotonic() - self.start:5.1f}s]"
        self._write([f"{stamp} {text}", *(f"{' ' * len(stamp)}   {d}" for d in detail)])

    def plain(self, text: str = "") -> None:
        self._write(text.split("\n"))


def _report_table(lines: list[ReportLine]) -> str:
    """The report, narrow enough for the demo: no workspace (it is gone) and no snapshot
    (each retire said it)."""
    rows = []
    for line in lines:
        why = re.sub(r";? ?snapshot refs/\S+", "", line.why).strip("; ")
        rows.append([line.worker, line.profile or "-", line.verdict, line.outcome, why])
    return table(rows, ["worker", "profile", "verdict", "outcome", "why"])


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **_GIT_ID}, capture_output=True,
        text=True, check=False, timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def make_repo(root: Path) -> tuple[Path, Path]:
    origin = root / "origin.git"
    repo = root / "repo"
    _git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "greeter").mkdir()
    (repo / "greeter" / "__init__.py").write_text('"""A tiny greeter."""\n')
    (repo / "README.md").write_text("# greeter\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "greeter: initial")
    _git(repo, "remote", "add", "origin", str(origin))
    _git(repo, "push", "-q", "-u", "origin", "main")
    return repo, origin


def plan_workers(now: float) -> tuple[list[PlannedWorker], str]:
    """Route the demo's tasks over a built-in sample of profiles with fleet's routing."""
    from fleet._core.routing import Profile, Quota, QuotaWindow, Settings, Task, plan

    def subscription(name: str, used: float) -> Profile:
        return Profile(
            name=name, tool="claude", config_dir=Path(f"~/.claude-{name.split(':')[1]}"),
            quota=Quota(
                state="ok", fetched_at=now - 60,
                session=QuotaWindow(used_percent=used), weekly=QuotaWindow(used_percent=used / 2),
            ),
        )

    profiles = [
        subscription("claude:main", 30.0),
        subscription("claude:work", 20.0),
        subscription("claude:personal", 55.0),
        Profile(
            name="claude:glm", tool="claude", kind="api", model="glm-4.6",
            config_dir=Path("~/.claude-glm"),
        ),
    ]
    tasks = [Task(name=t.name, kind=t.kind, model=t.model) for t in TASKS]
    result = plan(tasks, profiles, settings=Settings(), coordinator=profiles[0], now=now)
    planned = []
    for task, row in zip(TASKS, result.rows, strict=True):
        planned.append(
            PlannedWorker(task=task, profile=row.profile, model=row.model, reason=row.reason)
        )
    return planned, profiles[0].name


# -- the simulated worker --------------------------------------------------------------------


class SimulatedWorker(threading.Thread):
    """A stand-in for a Claude Code session: it fires the real hook with Claude-shaped payloads,
    edits, commits and pushes, and obeys what the coordinator sends on its inbox."""

    def __init__(
        self, *, worker: PlannedWorker, worktree: Path, hook: str, home: Path, pace: float,
        stop: threading.Event,
    ) -> None:
        super().__init__(name=f"demo-{worker.task.name}", daemon=True)
        self.plan = worker
        self.task = worker.task
        self.worktree = worktree
        self.hook = hook
        self.home = home
        self.pace = pace
        self.stop = stop
        self.inbox: queue.Queue[tuple[str, str]] = queue.Queue()
        self.session = str(uuid.uuid4())
        self.prompt = str(uuid.uuid4())
        self.tools = 0
        self.error: BaseException | None = None

    # What Claude Code itself puts in every payload.
    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        slug = str(self.worktree).replace("/", "-").replace(".", "-")
        base: dict[str, Any] = {
            "session_id": self.session,
            "transcript_path": f"{self.home}/claude/projects/{slug}/{self.session}.jsonl",
            "cwd": str(self.worktree),
            "prompt_id": self.prompt,
            "permission_mode": "default",
            "hook_event_name": event,
        }
        if event == "SessionStart":
            base.pop("prompt_id")
            base.pop("permission_mode")
            base["model"] = self.plan.model or "claude-sonnet-4-5"
        base.update(fields)
        return base

    def fire(self, event: str, **fields: Any) -> None:
        """Run the installed hook command, the way Claude Code does: a shell, the payload on
        stdin, the project dir and the worker id in the environment."""
        env = {
            **os.environ,
            "FLEET_WORKER": self.task.name,
            "FLEET_HOME": str(self.home),
            "CLAUDE_PROJECT_DIR": str(self.worktree),
            # The demo's person answers permission requests at the (simulated) terminal: the
            # hook journals the request and leaves it to the agent's own dialog at once.
            "FLEET_ANSWER_TIMEOUT": "0",
        }
        subprocess.run(
            ["/bin/sh", "-c", self.hook], input=orjson.dumps(self.payload(event, **fields)),
            env=env, cwd=self.worktree, capture_output=True, check=False, timeout=30,
        )

    def tool(self, name: str, tool_input: Mapping[str, Any], act: Callable[[], None]) -> None:
        self.tools += 1
        use_id = f"toolu_demo{self.task.name}{self.tools:03d}"
        self.fire("PreToolUse", tool_name=name, tool_input=dict(tool_input), tool_use_id=use_id)
        act()
        self.pause()
        self.fire(
            "PostToolUse", tool_name=name, tool_input=dict(tool_input), tool_use_id=use_id,
            tool_response={"stdout": "", "stderr": "", "interrupted": False},
        )

    def pause(self, factor: float = 1.0) -> None:
        if self.pace:
            self.stop.wait(self.pace * factor)

    def bash(self, command: str, act: Callable[[], None]) -> None:
        self.tool("Bash", {"command": command, "description": command}, act)

    def write_file(self) -> None:
        path = self.worktree / self.task.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.task.content)

    def commit(self) -> None:
        _git(self.worktree, "add", self.task.file)
        _git(self.worktree, "commit", "-q", "-m", f"{self.task.name}: {self.task.brief}")

    def push(self) -> None:
        # Worktrees share one .git/config: two `push -u` at the same moment can leave one branch
        # pushed but without its upstream (git only warns that the config was locked). A careful
        # agent looks, and pushes again.
        for _ in range(20):
            _git(self.worktree, "push", "-q", "-u", "origin", "HEAD")
            try:
                _git(self.worktree, "rev-parse", "--abbrev-ref", "@{upstream}")
                return
            except RuntimeError:
                time.sleep(0.05)

    def receive(self) -> tuple[str, str]:
        while not self.stop.is_set():
            try:
                return self.inbox.get(timeout=0.2)
            except queue.Empty:
                continue
        return ("exit", "")

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # surfaced by the coordinator, never lost in a thread
            self.error = exc

    def work(self) -> None:
        task = self.task
        self.fire("SessionStart", source="startup")
        self.fire("UserPromptSubmit", prompt="Read .fleet-brief.md and do what it says.")
        self.pause()
        self.tool(
            "Write", {"file_path": str(self.worktree / task.file), "content": task.content},
            self.write_file,
        )
        if task.asks_permission:
            command = "python3 -m pytest -q"
            self.fire("PreToolUse", tool_name="Bash",
                      tool_input={"command": command, "description": "Run the tests"},
                      tool_use_id=f"toolu_demo{task.name}perm")
            self.fire(
                "PermissionRequest", tool_name="Bash",
                tool_input={"command": command, "description": "Run the tests"},
                permission_suggestions=[],
            )
            self.fire("Notification", message="Claude needs your permission to use Bash",
                      notification_type="permission_prompt")
            kind, _ = self.receive()
            if kind != "approve":
                return
            self.fire("PostToolUse", tool_name="Bash",
                      tool_input={"command": command, "description": "Run the tests"},
                      tool_use_id=f"toolu_demo{task.name}perm",
                      tool_response={"stdout": "1 passed", "stderr": "", "interrupted": False})
        self.bash(f"git commit -m '{task.name}: ...'", self.commit)
        if not task.forgets_to_push:
            self.bash("git push -u origin HEAD", self.push)
        self.stop_turn(f"Wrote {task.file} and committed it.")
        while True:
            kind, text = self.receive()
            if kind != "follow-up":
                return
            self.prompt = str(uuid.uuid4())
            self.fire("UserPromptSubmit", prompt=text)
            self.pause()
            self.bash("git push -u origin HEAD", self.push)
            self.stop_turn(f"Pushed {task.name}'s branch.")

    def stop_turn(self, summary: str) -> None:
        message = f"{summary}\n\nFLEET_WORKER_DONE: {summary}"
        self.fire("Stop", stop_hook_active=False, last_assistant_message=message,
                  background_tasks=[])


# -- the coordinator -------------------------------------------------------------------------


def _describe(state: WorkerState) -> str:
    if state.state == "blocked" and state.reason == "permission":
        return f"asks permission to use {state.permission_tool or 'a tool'}"
    if state.state == "done" and state.envelope is not None:
        return f"claims done: {state.envelope.text}"
    return f"{state.state} ({state.reason})"


def run_demo(
    *, keep: bool = False, fast: bool = False, narrate: bool = True, out: TextIO | None = None
) -> DemoResult:
    """Run the whole demo; returns its report. ``out`` (default stdout) gets the narration."""
    start = time.monotonic()
    stream = (out or sys.stdout) if narrate else None
    say = Narrator(stream, start, colour=use_colour(stream))
    root = Path(tempfile.mkdtemp(prefix="fleet-demo-"))
    pace = 0.0 if fast else 0.15
    stop = threading.Event()
    sims: dict[str, SimulatedWorker] = {}
    hook = ""
    problems: list[str] = []
    lines: list[ReportLine] = []
    try:
        say.plain("fleet demo: three simulated Claude Code workers (no model runs, no network).")
        if keep:
            say.plain(f"Working in {root} (kept at the end: --keep).")
        else:
            say.plain(f"Working in {root}: everything there is removed at the end "
                      "(--keep keeps it).")
        say.plain()
        repo, _ = make_repo(root)
        home = root / "fleet-home"
        say.say(f"Created {repo.name}/ with a local bare origin ({root.name}/origin.git).")
        with Fleet(home) as fleet:
            planned, coordinator = plan_workers(fleet.clock.now())
            say.say(f"Planned {len(planned)} tasks over the sample profiles (the coordinator is "
                    f"{coordinator}, never a worker):",
                    *(f"{p.task.name:<7} -> {p.profile} ({p.model or 'default model'}): {p.reason}"
                      for p in planned))
            write_launcher(home)  # the installed command runs it
            hook = hook_command("claude", home=home)
            for p in planned:
                worktree = root / "worktrees" / p.task.name
                _git(repo, "worktree", "add", "-q", "-b", f"fleet/{p.task.name}",
                     str(worktree), "main")
                (worktree / ".fleet-brief.md").write_text(p.task.brief + "\n")
                exclude = Path(_git(repo, "rev-parse", "--git-common-dir"))
                exclude = (repo / exclude if not exclude.is_absolute() else exclude)
                with (exclude / "info" / "exclude").open("a") as f:
                    f.write("/.fleet-*.md\n")
                fleet.register(
                    p.task.name, worktree=worktree, tool="claude", profile=p.profile,
                    model=p.model, branch=f"fleet/{p.task.name}", base="main", task=p.task.brief,
                )
                sims[p.task.name] = SimulatedWorker(
                    worker=p, worktree=worktree, hook=hook, home=home, pace=pace, stop=stop
                )
            say.say("Started the workers, each in its own worktree and branch; every step "
                    "they take goes through fleet's real hook program, as `fleet hooks "
                    "install` sets it up for Claude Code.")
            for sim in sims.values():
                sim.start()
            coordinate(fleet, sims, say, problems, start)
            lines = build_report(fleet)
        say.plain()
        say.plain("Report:")
        say.plain(_report_table(lines))
        say.plain()
        say.plain(format_report(lines).splitlines()[-1])
    except Exception as exc:
        problems.append(f"{type(exc).__name__}: {exc}")
        say.plain(f"demo failed: {exc}")
    finally:
        stop.set()
        for sim in sims.values():
            sim.join(timeout=10)
            if sim.error is not None:
                problems.append(f"worker {sim.task.name}: {sim.error}")
        if keep:
            say.plain()
            say.plain(f"Kept {root}: the repository, its origin, the worktrees and the fleet "
                      f"home. Look around: fleet --home {root / 'fleet-home'} status")
        else:
            shutil.rmtree(root, ignore_errors=True)
            say.plain()
            say.plain(f"Removed {root}: the repository, its origin, the worktrees and the fleet "
                      "home were the demo's own (--keep keeps them).")
        say.plain("Next: your own agents. Install fleet's hook (fleet hooks install --config-dir "
                  "~/.claude), add a profile (fleet profiles add NAME --config-dir DIR), and "
                  "follow the README's quick start.")
    ok = not problems and len(lines) == len(TASKS) and all(
        line.outcome == "retired" for line in lines
    )
    return DemoResult(
        ok=ok, root=str(root), kept=keep, hook=hook, hook_program=str(hook_script_path()),
        seconds=round(time.monotonic() - start, 2),
        report=tuple(lines), narration=tuple(say.lines), problems=tuple(problems),
    )


def coordinate(
    fleet: Fleet,
    sims: Mapping[str, SimulatedWorker],
    say: Narrator,
    problems: list[str],
    start: float,
) -> None:
    """The coordinator loop: wait, handle what woke it, and pass the marks back as seen."""
    retirer = Retirer(fleet)
    pending = set(sims)
    seen: list[str] = []
    say.say("Coordinator: waiting (fleet.wait) until a worker needs attention. Retire mode "
            "is auto for this demo (the default is ask).")
    while pending:
        left = DEADLINE - (time.monotonic() - start)
        if left <= 0:
            problems.append(f"gave up waiting for {', '.join(sorted(pending))}")
            return
        result = fleet.wait(sorted(pending), seen=seen, timeout=min(left, 20.0))
        if result.timed_out:
            continue
        for state in result.attention:
            seen.append(state.mark)
            name = state.worker
            sim = sims[name]
            say.say(f"{name}: {_describe(state)}  [mark {state.mark}]")
            if state.state == "blocked" and state.reason == "permission":
                say.plain(f"{'':11}coordinator approves; fleet.seen({state.mark!r}) so it "
                          "never wakes the loop again")
                fleet.seen(state.mark)
                sim.inbox.put(("approve", ""))
            elif state.state == "done":
                handle_done(fleet, retirer, sim, state, say, pending)
            elif state.state in ("gone", "stopped", "quiet"):
                problems.append(f"{name} ended up {state.state} ({state.reason})")
                pending.discard(name)


def handle_done(
    fleet: Fleet,
    retirer: Retirer,
    sim: SimulatedWorker,
    state: WorkerState,
    say: Narrator,
    pending: set[str],
) -> None:
    name = state.worker
    result = check_worker(fleet, name, commands=[sim.task.check])
    if not result.ok:
        say.plain(f"{'':11}fleet check: FAILED: " + "; ".join(result.findings))
        refused = retirer.retire_worker(name)
        say.plain(f"{'':11}fleet retire: refused, worktree kept ({refused.reason})")
        text = "fleet check failed: " + "; ".join(result.findings) + ". Fix that and claim again."
        fleet.note_follow_up(name, text=text)
        sim.inbox.put(("follow-up", text))
        say.plain(f"{'':11}follow-up sent: {text}")
        return
    commits = f"{len(result.commits)} commit{'' if len(result.commits) == 1 else 's'}"
    say.plain(f"{'':11}fleet check: checked ({commits}, clean, pushed to "
              f"{result.upstream}, `{sim.task.check}` passed)")
    outcome = retirer.retire_worker(name)
    if outcome.retired:
        say.plain(f"{'':11}retired: worktree removed, branch {outcome.branch} kept, "
                  f"snapshot {outcome.ref}")
    else:
        say.plain(f"{'':11}kept: {outcome.reason}")
    sim.inbox.put(("exit", ""))
    pending.discard(name)
