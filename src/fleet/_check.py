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

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._blind import CriterionVerdict, Reviewer, findings_of, run_review
from fleet._core.events import Checked
from fleet._core.fold import WorkerState
from fleet._errors import Refused, ToolError
from fleet._fleet import Fleet
from fleet._git import Commit, Git, GitError, printable
from fleet._guards import inspect_worktree, plural
from fleet._runner import Runner

DEFAULT_CMD_TIMEOUT: Final = 900.0
TAIL_LINES: Final = 20
TAIL_CHARS: Final = 2000


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
    #: the blind reviewer, and its verdict on each criterion (empty without a blind review)
    reviewer: str | None = None
    criteria: tuple[CriterionVerdict, ...] = ()

    @property
    def ok(self) -> bool:
        return self.verdict == "checked"


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
    blind: tuple[Reviewer, Sequence[str]] | None = None,
) -> CheckResult:
    """Check a worker's work in its registered worktree and journal the verdict. With
    ``blind`` (a reviewer and the criteria), a work that passes git and the commands is also
    judged by a blind reviewer (:mod:`fleet._blind`); every criterion must pass."""
    state = fleet.state(worker)
    if state.state == "retired":
        raise Refused(f"{worker} is retired: its worktree is gone, there is nothing to check")
    git = Git(runner)
    result = evaluate(git, state, base=base, commands=commands, timeout=timeout)
    if blind is not None and result.ok:
        reviewer, criteria = blind
        review = run_review(state, criteria, reviewer, base=result.base, fleet_home=fleet.home,
                            git=git)
        verdicts = review.verdicts
        findings = findings_of(verdicts, changed=review.changed, kept=review.kept,
                               left=review.left)
        result = attrs.evolve(result, reviewer=reviewer.name, criteria=verdicts,
                              findings=findings, verdict="failed" if findings else "checked")
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
                reviewer=result.reviewer,
                criteria=tuple(v.as_dict() for v in result.criteria),
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
        findings.append(f"{plural(len(commands), 'check command')} not run")
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
