"""Retiring workers: ``fleet retire``. Deleting a worktree is the one thing fleet does that can
lose work, so this module proves, twice, that there is nothing to lose.

A worker is retired only when all of these hold:

1. it claimed done and its claim was checked (a claim that was never checked is checked here,
   first, with the same rules as ``fleet check``; a failed check refuses);
2. HEAD is still the commit that was checked;
3. the worktree is clean (modified, staged and untracked files all count, and so does an edit an
   index flag hides from git status: every file is hashed against HEAD) and HEAD is on a branch
   whose upstream is on a remote, with nothing ahead of it, and the remote itself has HEAD on
   that branch (a branch deleted or rewritten on the remote since the last fetch is unpushed);
4. nothing git ignores holds work: no ignored nested repository has commits found nowhere else,
   and no worktree-private ref (``refs/worktree/*``, bisect refs, a per-worktree stash, an
   operation in progress) reaches a commit no shared ref does (:mod:`fleet._leftovers`).
   Ignored plain files may go; ask mode lists them first.

Then, inside one operation: a process still running in the worktree (its working directory, an
open file or its executable there) refuses, by pid and command; the worker's own agent is
stopped first when its adapter can stop it (headless). The worktree's state is saved to
``refs/fleet/<worker>/<UTC time>`` in the repository (local: the commits are on the remote
already, and the ref keeps them reachable here even if the remote branch is later deleted or
rewritten); every guard runs again; the worker's adapter deletes the workspace, never forced (for
a plain worktree, ``git worktree remove``, which itself refuses modified or untracked files); the
worktree directory is confirmed gone; and ``retired`` is journaled with the ref. Any git error,
at any step, refuses. A refusal is journaled as ``retire_refused`` with the exact reason.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import attrs

from fleet._check import CheckResult, check_worker
from fleet._core.events import Retired, RetireRefused
from fleet._core.fold import WorkerState
from fleet._errors import FleetError, SettingsError, one_line
from fleet._fleet import Fleet
from fleet._git import Git, GitError, printable
from fleet._guards import inspect_worktree
from fleet._leftovers import IgnoredSummary, Leftovers, inspect_leftovers
from fleet._occupants import Occupant, describe_occupants, occupants
from fleet._runner import Runner
from fleet.adapters import Deleter, get_deleter
from fleet.adapters._base import Workspace

Mode: TypeAlias = Literal["ask", "auto"]
MODES: Final[tuple[Mode, ...]] = ("ask", "auto")
DEFAULT_MODE: Final[Mode] = "ask"
REF_PREFIX: Final = "refs/fleet"
#: How long the processes of a stopped agent get to end before they count as still running.
STOP_GRACE: Final = 5.0

DeleterFactory: TypeAlias = Callable[..., Deleter]


@attrs.frozen(kw_only=True)
class Candidate:
    """A worker that passed every guard and may be retired (after confirmation in ask mode)."""

    worker: str
    worktree: Path
    branch: str
    head: str
    upstream: str | None
    adapter: str | None
    handle: Mapping[str, str] = attrs.field(factory=dict)
    base: str | None = None
    profile: str | None = None
    model: str | None = None
    checked_now: bool = False
    ignored: IgnoredSummary | None = None


@attrs.frozen(kw_only=True)
class Outcome:
    """What happened to one worker: retired (with its snapshot ref) or kept, and why."""

    worker: str
    retired: bool
    reason: str | None = None
    ref: str | None = None
    worktree: str | None = None
    branch: str | None = None
    head: str | None = None
    upstream: str | None = None
    checked_now: bool = False
    refused: bool = False
    check: CheckResult | None = None
    #: the ignored files the delete took (retired) or would take (kept)
    ignored: IgnoredSummary | None = None
    #: what happened between the last check and the delete (a retired worker's branch moved)
    warnings: tuple[str, ...] = ()


def parse_mode(value: object, where: str = "retire mode") -> Mode:
    if value == "ask":
        return "ask"
    if value == "auto":
        return "auto"
    raise SettingsError(f"{where} must be 'ask' or 'auto', not {value!r}")


def mode_from_settings(path: str | os.PathLike[str] | None = None) -> Mode:
    """The ``retire`` setting (``~/.clausona/fleet.json``, or ``$FLEET_SETTINGS``), else ``ask``.
    A malformed settings file is an error, not a silent default."""
    from fleet._settings import load_settings

    return parse_mode(load_settings(path).retire, "the retire setting")


def _ref_time(now: float) -> str:
    micros = round((now - int(now)) * 1_000_000) % 1_000_000
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(int(now))) + f".{micros:06d}Z"


class Retirer:
    """Check, guard, snapshot, delete, confirm, journal: one worker at a time.

    ``before_delete(candidate)`` is called after the snapshot and right before the guards are
    re-run and the delete is made; tests use it to change the worktree at the worst moment.
    ``stop_grace`` is how long a stopped agent's processes get to leave the worktree."""

    def __init__(
        self,
        fleet: Fleet,
        *,
        runner: Runner | None = None,
        deleter_factory: DeleterFactory | None = None,
        before_delete: Callable[[Candidate], None] | None = None,
        base: str | None = None,
        commands: Sequence[str] = (),
        timeout: float | None = None,
        stop_grace: float = STOP_GRACE,
    ) -> None:
        self.fleet = fleet
        self.runner = runner
        self.git = Git(runner)
        self.deleter_factory: DeleterFactory = deleter_factory or get_deleter
        self.before_delete = before_delete
        self.base = base
        self.commands = tuple(commands)
        self.timeout = timeout
        self.stop_grace = stop_grace

    # -- judging ---------------------------------------------------------------------------

    def assess(self, worker: str, *, journal_refusal: bool = True) -> Candidate | Outcome:
        """A candidate when every guard passes, else the refusal (journaled)."""
        state = self.fleet.state(worker)
        if state.state == "retired":
            return Outcome(
                worker=worker, retired=True, reason="already retired",
                worktree=state.worktree, branch=state.branch, ref=state.retired_ref,
            )
        if state.state != "done":
            return self._refuse(
                state, f"not done: {state.state} ({state.reason})", journal=journal_refusal
            )
        check: CheckResult | None = None
        if state.reason != "checked":
            if state.reason == "failed":
                return self._refuse(
                    state, "check failed: " + "; ".join(state.findings or ("no findings",)),
                    journal=journal_refusal,
                )
            # A claim nobody checked: check it now, with fleet check's rules, and journal it.
            kwargs: dict[str, Any] = {"base": self.base, "commands": self.commands}
            if self.timeout is not None:
                kwargs["timeout"] = self.timeout
            check = check_worker(self.fleet, worker, runner=self.runner, **kwargs)
            if not check.ok:
                return self._refuse(
                    state, "check failed: " + "; ".join(check.findings),
                    journal=journal_refusal, check=check,
                )
            state = self.fleet.state(worker)
        checked_head = state.checked_head
        if not state.worktree:
            return self._refuse(state, "no worktree registered", journal=journal_refusal)
        found = inspect_worktree(self.git, state.worktree, branch=state.branch)
        problems = list(found.problems)
        if not problems and checked_head is not None and found.head != checked_head:
            problems.append(_moved(checked_head, found.head))
        if not problems and checked_head is None:
            problems.append("the check did not record HEAD: check again")
        leftovers = inspect_leftovers(self.git, state.worktree)
        problems.extend(leftovers.problems)
        if problems or found.head is None or found.branch is None:
            return self._refuse(
                state, "; ".join(problems) or "HEAD unknown", journal=journal_refusal, check=check
            )
        return Candidate(
            worker=worker,
            worktree=Path(state.worktree),
            branch=found.branch,
            head=found.head,
            upstream=found.upstream.short if found.upstream else None,
            adapter=state.adapter,
            handle=dict(state.handle),
            base=state.base,
            profile=state.profile,
            model=state.model,
            checked_now=check is not None,
            ignored=leftovers.ignored,
        )

    # -- acting ----------------------------------------------------------------------------

    def retire(self, candidate: Candidate) -> Outcome:
        """Stop the agent if it still runs, snapshot, re-check, delete, confirm, journal.
        Refuses on any doubt."""
        state = self.fleet.state(candidate.worker)
        if state.state != "done" or state.reason != "checked":
            return self._refuse(state, f"changed since it was judged: now {state.state} "
                                f"({state.reason})", candidate=candidate)
        worktree = candidate.worktree
        try:
            deleter = self.deleter_factory(
                candidate.adapter, runner=self.runner, home=self.fleet.home, clock=self.fleet.clock
            )
        except (FleetError, OSError, ValueError) as exc:
            return self._refuse(state, f"no adapter to delete with: {one_line(exc)}",
                                candidate=candidate)
        busy = self._clear_occupants(candidate, deleter)
        if busy:
            return self._refuse(state, busy, candidate=candidate)
        ref = f"{REF_PREFIX}/{candidate.worker}/{_ref_time(self.fleet.clock.now())}"
        try:
            # Where the branch lives once the worktree is gone, to see what it holds after.
            repo = self.git.common_dir(worktree)
            saved = self.git.snapshot(
                worktree, ref, f"fleet retire {candidate.worker}: snapshot before delete"
            )
        except GitError as exc:
            return self._refuse(state, f"could not save a snapshot ref: {exc}", candidate=candidate)
        if self.before_delete is not None:
            self.before_delete(candidate)
        try:
            with hold_head(self.git, worktree):
                refused, leftovers, error = self._check_and_delete(
                    candidate, deleter, saved, ref
                )
        except HeadBusy as exc:
            return self._refuse(state, f"{exc} (state saved at {ref})", candidate=candidate,
                                ref=ref)
        if refused is not None:
            return self._refuse(state, refused, candidate=candidate, ref=ref)
        notes = [printable(n) for n in (error, self._after_delete(candidate, repo)) if n]
        note = "; ".join(notes) or None
        self.fleet.record(
            candidate.worker,
            Retired(ts=self.fleet.clock.now(), src=self.fleet.src, ref=ref, note=note),
        )
        return Outcome(
            worker=candidate.worker, retired=True, ref=ref, worktree=str(worktree),
            branch=candidate.branch, head=candidate.head, upstream=candidate.upstream,
            checked_now=candidate.checked_now, ignored=leftovers.ignored,
            warnings=tuple(notes),
        )

    def _check_and_delete(
        self, candidate: Candidate, deleter: Deleter, saved: str, ref: str
    ) -> tuple[str | None, Leftovers, str | None]:
        """The last round of guards and the delete, while no git command in the worktree can
        move its HEAD. Returns why the worktree was kept (None when it is gone), what the
        guards found, and the error an adapter raised after it deleted the worktree anyway."""
        worktree = candidate.worktree
        # The guards again, as late as possible: anything that changed since they last ran
        # (a new file, a new commit, a reset upstream, a process started there) refuses.
        problems = self._final_problems(candidate)
        if not problems and saved != candidate.head:
            problems.append("the worktree changed while it was being saved")
        leftovers = inspect_leftovers(self.git, worktree)
        problems.extend(leftovers.problems)
        if problems:
            return "; ".join(problems) + f" (state saved at {ref})", leftovers, None
        workspace = Workspace(
            worktree=worktree, branch=candidate.branch, base=candidate.base,
            handle=candidate.handle,
        )
        try:
            deleter.delete(workspace)
        except (FleetError, OSError, ValueError) as exc:
            if not os.path.lexists(worktree):
                # The host deleted it and then failed: it is gone, after every guard passed.
                return None, leftovers, f"the adapter reported an error: {one_line(exc)}"
            # Whatever landed after the last check is what made the delete fail: name it.
            late = self._since_last_check(candidate)
            return (f"delete refused: {one_line(exc)}{late} (state saved at {ref})",
                    leftovers, None)
        if os.path.lexists(worktree):
            return (f"{worktree} still exists after the delete (state saved at {ref})",
                    leftovers, None)
        return None, leftovers, None

    def _since_last_check(self, candidate: Candidate) -> str:
        """``; since the last check: <problems>`` for a worktree still there, else ``""``."""
        if not os.path.isdir(candidate.worktree):
            return ""
        problems = self._final_problems(candidate)
        return f"; since the last check: {'; '.join(problems)}" if problems else ""

    def _after_delete(self, candidate: Candidate, repo: Path) -> str | None:
        """What the branch holds now, when it is no longer what was checked: a commit that
        landed after the last check is reported, never passed off as pushed."""
        branch = candidate.branch
        try:
            tip = self.git.resolve(repo, f"refs/heads/{branch}")
            if tip == candidate.head:
                return None
            if tip is None:
                return (f"branch {branch} was deleted after the last check (its last checked "
                        f"commit {candidate.head[:7]} is on the remote and in the snapshot)")
            upstream = f"refs/remotes/{candidate.upstream}" if candidate.upstream else None
            unpushed = self.git.count(repo, tip, "--not", upstream) if upstream else None
        except GitError as exc:
            return f"could not read branch {branch} after the delete: {exc}"
        if unpushed:
            return (f"branch {branch} moved to {tip[:7]} after the last check: "
                    f"{_plural(unpushed, 'commit')} not on the remote {candidate.upstream} "
                    "(kept on the branch)")
        return f"branch {branch} moved to {tip[:7]} after the last check"

    def _final_problems(self, candidate: Candidate) -> list[str]:
        """Every guard of :meth:`assess` on the worktree, and no process in it."""
        found = inspect_worktree(self.git, candidate.worktree, branch=candidate.branch)
        problems = list(found.problems)
        if found.head is not None and found.head != candidate.head:
            problems.insert(0, _moved(candidate.head, found.head))
        busy = occupants(candidate.worktree)
        if busy:
            problems.append(describe_occupants(busy))
        return problems

    def _clear_occupants(self, candidate: Candidate, deleter: Deleter) -> str | None:
        """Why the worktree cannot be deleted yet because processes use it, or None.

        When the worker's adapter can stop its agent (headless: ``stop``; an app: ``close``,
        which ends the agent's terminal or pane, as the app's own delete would), it is stopped
        first and the worktree looked at again; whatever still runs there (a dev server, an
        editor, a shell) refuses, by pid and command."""
        found = occupants(candidate.worktree)
        if not found:
            return None
        try:
            stopped = _stop_agent(deleter, candidate)
        except (FleetError, OSError, ValueError) as exc:
            return f"{describe_occupants(found)} (stopping its agent failed: {one_line(exc)})"
        if not stopped:
            # Nothing of the worker's own was running (or its adapter cannot stop it): what
            # runs there is someone else's, and fleet does not stop it.
            return describe_occupants(found)
        found = self._wait_for_occupants(candidate.worktree)
        if found:
            return f"{describe_occupants(found)} (after its agent was stopped)"
        return None

    def _wait_for_occupants(self, worktree: Path) -> list[Occupant]:
        """The processes still in ``worktree`` once those that are ending have ended (a
        stopped agent's children take a moment), waiting at most ``stop_grace`` seconds."""
        end = time.monotonic() + self.stop_grace
        while True:
            found = occupants(worktree)
            if not found or time.monotonic() >= end:
                return found
            time.sleep(0.05)

    def retire_worker(self, worker: str) -> Outcome:
        """Assess and retire in one go (auto mode)."""
        judged = self.assess(worker)
        return judged if isinstance(judged, Outcome) else self.retire(judged)

    # -- helpers ---------------------------------------------------------------------------

    def _refuse(
        self,
        state: WorkerState,
        reason: str,
        *,
        journal: bool = True,
        check: CheckResult | None = None,
        candidate: Candidate | None = None,
        ref: str | None = None,
    ) -> Outcome:
        # Every refusal names its reason; one that reached here without one is a fleet bug,
        # and the user still gets a sentence, not an empty string.
        reason = " ".join(printable(reason).split()) or "refused, and fleet did not say why (a bug)"
        if journal:
            self.fleet.record(
                state.worker,
                RetireRefused(ts=self.fleet.clock.now(), src=self.fleet.src, reason=reason),
            )
        return Outcome(
            worker=state.worker,
            retired=False,
            refused=True,
            reason=reason,
            ref=ref,
            worktree=state.worktree,
            branch=candidate.branch if candidate else state.branch,
            head=candidate.head if candidate else None,
            upstream=candidate.upstream if candidate else None,
            checked_now=check is not None or bool(candidate and candidate.checked_now),
            check=check,
            ignored=candidate.ignored if candidate else None,
        )



def _stop_agent(deleter: Deleter, candidate: Candidate) -> bool:
    """Stop the worker's own agent through its adapter: ``stop(worker)`` (headless, False when
    nothing was running) or ``close(workspace)`` (an app's terminal or pane). False when the
    adapter has neither (a plain worktree)."""
    stop = getattr(deleter, "stop", None)
    if callable(stop):
        return bool(stop(candidate.worker))
    close = getattr(deleter, "close", None)
    if callable(close):
        close(Workspace(worktree=candidate.worktree, branch=candidate.branch,
                        base=candidate.base, handle=candidate.handle))
        return True
    return False


class HeadBusy(FleetError):
    """The worktree's HEAD is locked: a git command is running there."""


@contextlib.contextmanager
def hold_head(git: Git, worktree: Path) -> Iterator[None]:
    """Hold the worktree's ``HEAD.lock`` (git's own lock file) from the last check until the
    delete is over: a commit, checkout or reset in the worktree fails loudly in that window
    instead of landing unseen and being deleted with it. The lock is git's standard one, so a
    fleet killed here leaves what a killed git leaves; the delete removes it with the git dir,
    and a refusal removes it (only if it is still fleet's own)."""
    try:
        lock = git.git_dir(worktree) / "HEAD.lock"
    except GitError as exc:
        raise HeadBusy(f"could not find the worktree's git dir: {exc}") from exc
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise HeadBusy(f"git is busy in the worktree ({lock} exists): retry when it is done") \
            from None
    except OSError as exc:
        raise HeadBusy(f"could not lock the worktree's HEAD: {exc.strerror or exc}") from exc
    try:
        mine = os.fstat(fd)
    finally:
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            now = os.lstat(lock)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                os.unlink(lock)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _moved(old: str, new: str | None) -> str:
    return f"HEAD moved since the check ({old[:7]} -> {(new or '?')[:7]}): check again"


def confirm_on_tty(prompt: str, *, stdin: Any = None, stdout: Any = None) -> bool | None:
    """Ask y/N on a terminal. None when there is no terminal to ask on."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if not (stdin.isatty() and stdout.isatty()):
        return None
    stdout.write(prompt)
    stdout.flush()
    answer = stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def done_workers(states: Iterable[WorkerState]) -> list[str]:
    return [s.worker for s in states if s.state == "done"]
