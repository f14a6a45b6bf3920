"""Checking a worker's claim: ``fleet check``.

A DONE envelope is a claim. The check looks at the worktree itself:

- commits exist in ``base..HEAD``;
- the worktree is clean (modified, staged and untracked files all count; ignored files do not),
  and every file of HEAD really has HEAD's content: each is hashed again, so an edit that an
  index flag (skip-worktree, assume-unchanged) or a stale stat cache hides from ``git status``
  counts too;
- HEAD is on a branch that has an upstream on a remote, nothing is ahead of it, and the remote
  itself (asked with ``git ls-remote``, not just the local tracking ref) has HEAD on that branch;
- each check command passes, run in the worktree with a timeout (its output tail is kept).

The verdict, ``checked`` or ``failed`` with one finding per problem, is journaled as a
:class:`~fleet._core.events.Checked` event. The same worktree guards (:func:`inspect_worktree`)
are what retire re-runs immediately before it deletes anything.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._core.events import Checked
from fleet._core.fold import WorkerState
from fleet._errors import Refused, ToolError
from fleet._fleet import Fleet
from fleet._git import Commit, ContentChange, Git, GitError, StatusEntry, Upstream, printable
from fleet._runner import Runner

DEFAULT_CMD_TIMEOUT: Final = 900.0
TAIL_LINES: Final = 20
TAIL_CHARS: Final = 2000
#: How many dirty paths a finding names one by one before it summarises the rest.
_NAMED_PATHS: Final = 5


@attrs.frozen(kw_only=True)
class Inspection:
    """What git says about a worktree, and every reason its work is not safe on the remote.

    ``problems`` empty means: the worktree exists and is a git worktree, HEAD is on the expected
    branch, nothing is modified, staged or untracked, and the commit at HEAD is on the remote
    branch the upstream names."""

    worktree: Path
    head: str | None = None
    branch: str | None = None
    upstream: Upstream | None = None
    remote_head: str | None = None
    ahead: int | None = None
    dirty: tuple[StatusEntry, ...] = ()
    hidden: tuple[ContentChange, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def safe(self) -> bool:
        return not self.problems


@attrs.frozen(kw_only=True)
class CommandResult:
    cmd: str
    exit_code: int | None
    ok: bool
    seconds: float
    tail: str


@attrs.frozen(kw_only=True)
class CheckResult:
    worker: str
    verdict: str
    findings: tuple[str, ...]
    base: str | None
    head: str | None
    branch: str | None
    upstream: str | None
    commits: tuple[str, ...] = ()
    commands: tuple[CommandResult, ...] = ()
    state: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "checked"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe_dirty(entries: Sequence[StatusEntry | ContentChange]) -> list[str]:
    """One finding per dirty path, the first few by name: ``untracked file notes.txt``."""
    out = [e.describe() for e in entries[:_NAMED_PATHS]]
    if len(entries) > _NAMED_PATHS:
        out.append(f"{_plural(len(entries) - _NAMED_PATHS, 'more changed file')}")
    return out


def hidden_changes(
    git: Git, path: Path, dirty: Sequence[StatusEntry]
) -> tuple[ContentChange, ...]:
    """The content changes ``git status`` did not report (an index flag or a stale stat cache
    hid them); what it did report is named once, by status."""
    seen = {e.path for e in dirty} | {e.orig for e in dirty if e.orig}
    return tuple(c for c in git.content_changes(path) if c.path not in seen)


def inspect_worktree(
    git: Git, worktree: str | os.PathLike[str], *, branch: str | None = None
) -> Inspection:
    """Run every guard on a worktree. Never raises for git trouble: a git error is a problem,
    because a guard that cannot be evaluated must not pass."""
    path = Path(worktree)
    problems: list[str] = []
    fields: dict[str, object] = {"worktree": path}
    try:
        if not path.is_dir():
            return Inspection(worktree=path, problems=(f"worktree {path} does not exist",))
        top = git.toplevel(path)
        if os.path.realpath(top) != os.path.realpath(path):
            return Inspection(
                worktree=path, problems=(f"{path} is inside the worktree {top}, not its top",)
            )
        head = git.head(path)
        fields["head"] = head
        current = git.branch(path)
        fields["branch"] = current
        dirty = tuple(git.status(path))
        fields["dirty"] = dirty
        problems.extend(describe_dirty(dirty))
        hidden = hidden_changes(git, path, dirty)
        fields["hidden"] = hidden
        problems.extend(describe_dirty(hidden))
        if current is None:
            problems.append("detached HEAD")
        else:
            if branch and current != branch:
                problems.append(f"on branch {current}, registered branch {branch}")
            problems.extend(_remote_problems(git, path, current, head, fields))
    except GitError as exc:
        problems.append(f"git error: {exc}")
    return Inspection(
        problems=tuple(printable(p) for p in problems), **fields  # type: ignore[arg-type]
    )


def _remote_problems(
    git: Git, path: Path, branch: str, head: str, fields: dict[str, object]
) -> list[str]:
    upstream = git.upstream(path, branch)
    fields["upstream"] = upstream
    if upstream is None:
        return ["no upstream (never pushed: git push -u origin HEAD)"]
    if upstream.remote in ("", ".") or not upstream.ref.startswith("refs/remotes/"):
        return [f"upstream {upstream.short} is a local branch, not a remote one"]
    if git.resolve(path, upstream.ref) is None:
        return [f"upstream {upstream.short} is gone"]
    ahead = git.count(path, f"{upstream.ref}..{head}")
    fields["ahead"] = ahead
    if ahead:
        return [f"{_plural(ahead, 'commit')} not pushed to {upstream.short}"]
    # The tracking ref is only what the remote held at the last fetch: a branch deleted or
    # rewritten on the remote since (say, after a squash merge) still looks pushed here.
    remote_head = git.ls_remote(path, upstream.remote, upstream.remote_ref)
    fields["remote_head"] = remote_head
    if remote_head is None:
        return [f"branch {upstream.remote_ref.removeprefix('refs/heads/')} is gone from "
                f"remote {upstream.remote}"]
    if remote_head == head:
        return []
    if not git.has_commit(path, remote_head):
        # The remote branch moved on (someone pushed on top, or rewrote it): fetch it to see
        # whether HEAD is still in its history.
        git.fetch(path, upstream.remote, upstream.remote_ref)
        if not git.has_commit(path, remote_head):
            return [f"{upstream.short} on the remote is at {remote_head[:12]}, which fetching "
                    "did not bring here"]
    if git.is_ancestor(path, head, remote_head):
        return []
    missing = git.count(path, f"{remote_head}..{head}")
    return [f"{_plural(missing, 'commit')} not on the remote branch {upstream.short}"]


def _tail(text: str) -> str:
    lines = printable(text).rstrip("\n").splitlines()[-TAIL_LINES:]
    joined = "\n".join(lines)
    return joined[-TAIL_CHARS:]


def run_command(
    runner: Runner, cmd: str, cwd: Path, *, timeout: float = DEFAULT_CMD_TIMEOUT
) -> CommandResult:
    """Run one check command with ``sh -c`` in the worktree; keep the tail of its output."""
    start = time.monotonic()
    try:
        done = runner.run(["sh", "-c", cmd], cwd=cwd, timeout=timeout)
    except ToolError as exc:
        return CommandResult(
            cmd=cmd, exit_code=None, ok=False, seconds=time.monotonic() - start, tail=str(exc)
        )
    out = done.stdout + (("\n" if done.stdout and done.stderr else "") + done.stderr)
    return CommandResult(
        cmd=cmd,
        exit_code=done.returncode,
        ok=done.returncode == 0,
        seconds=time.monotonic() - start,
        tail=_tail(out),
    )


def _command_finding(result: CommandResult) -> str:
    last = (result.tail.strip().splitlines() or [""])[-1].strip()
    code = "timed out" if result.exit_code is None else f"exit {result.exit_code}"
    return f"check `{result.cmd}` failed ({code})" + (f": {last[:200]}" if last else "")


def check_worker(
    fleet: Fleet,
    worker: str,
    *,
    base: str | None = None,
    commands: Sequence[str] = (),
    runner: Runner | None = None,
    timeout: float = DEFAULT_CMD_TIMEOUT,
    journal: bool = True,
) -> CheckResult:
    """Check a worker's work in its registered worktree and journal the verdict."""
    state = fleet.state(worker)
    if state.state == "retired":
        raise Refused(f"{worker} is retired: its worktree is gone, there is nothing to check")
    git = Git(runner)
    result = evaluate(git, state, base=base, commands=commands, timeout=timeout)
    if journal:
        fleet.record(
            worker,
            Checked(
                ts=fleet.clock.now(),
                src=fleet.src,
                verdict=result.verdict,
                findings=result.findings,
                base=result.base,
                head=result.head,
            ),
        )
    return result


def evaluate(
    git: Git,
    state: WorkerState,
    *,
    base: str | None = None,
    commands: Sequence[str] = (),
    timeout: float = DEFAULT_CMD_TIMEOUT,
) -> CheckResult:
    """The verdict on a worker, without journaling it."""
    findings: list[str] = []
    base = base or state.base
    commits: list[Commit] = []
    cmd_results: list[CommandResult] = []
    if not state.worktree:
        findings.append("no worktree registered")
        return CheckResult(
            worker=state.worker, verdict="failed", findings=tuple(findings), base=base,
            head=None, branch=state.branch, upstream=None, state=state.state,
        )
    worktree = Path(state.worktree)
    found = inspect_worktree(git, worktree, branch=state.branch)
    if found.head is not None:
        if not base:
            findings.append("no base to compare with (register with --base or pass --base)")
        else:
            try:
                if git.resolve(worktree, base) is None:
                    findings.append(f"base {base} does not name a commit here")
                else:
                    commits = git.commits(worktree, base, found.head)
                    if not commits:
                        findings.append(f"no commits in {base}..HEAD")
            except GitError as exc:
                findings.append(f"git error: {exc}")
    findings.extend(found.problems)
    if found.head is not None:
        for cmd in commands:
            outcome = run_command(git.runner, cmd, worktree, timeout=timeout)
            cmd_results.append(outcome)
            if not outcome.ok:
                findings.append(_command_finding(outcome))
    elif commands:
        findings.append(f"{_plural(len(commands), 'check command')} not run")
    return CheckResult(
        worker=state.worker,
        verdict="failed" if findings else "checked",
        findings=tuple(findings),
        base=base,
        head=found.head,
        branch=found.branch,
        upstream=found.upstream.short if found.upstream else None,
        commits=tuple(printable(c.oneline()) for c in commits),
        commands=tuple(cmd_results),
        state=state.state,
    )
