"""A blind review of a worker's work: a headless Claude Code run on a third profile (neither the
worker's nor the coordinator's), with read-only tools, in the worker's worktree, that judges the
work against written criteria without seeing the worker's own account of it.

The reviewer is told the criteria, the branch and its base, nothing else; it answers one line
per criterion (``CRITERION 2: FAIL: no test covers the empty input``), which
:func:`parse_verdicts` reads. Its session's hooks write into a scratch fleet home: the review
is not the worker, and nothing it does reaches the worker's journal.

It cannot change anything. It has no shell: a git command takes flags that write
(``git diff --output=FILE``), so fleet renders the history itself, the log and the diff of
the work, into read-only files in the review's scratch directory, and the reviewer gets only
Read, Grep and Glob (``--tools``: no other tool exists in its session, and no MCP server).
And fleet does not take that on trust: the worktree, its git state and the directories around
it are compared before and after the review (:mod:`fleet._review_guard`); any change fails
the check, is reported, and is taken back (what it left is kept aside, under
``refs/fleet-review/<worker>/<time>`` and ``$FLEET_HOME/review-leftovers/``).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet import _review_guard
from fleet._core.fold import WorkerState
from fleet._core.results import parse_claude
from fleet._errors import SettingsError, ToolError
from fleet._files import read_prompt
from fleet._git import Git, printable
from fleet._home import resolve_home
from fleet._keys import resolve_key
from fleet.adapters._headless_run import LaunchRecord, build_run, default_key_var

#: What a reviewer may do: read files, change nothing. These are the only tools its session
#: has (``--tools``), and the ones its rules allow.
READ_ONLY_TOOLS: Final = ("Read", "Grep", "Glob")
#: Denied as well, should a release bring one back despite ``--tools``.
DENIED_TOOLS: Final = ("Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "WebFetch",
                       "WebSearch", "Task", "Agent")
#: How much of the log the prompt itself quotes (the whole log is in a file).
_PROMPT_LOG_LINES: Final = 40
DEFAULT_REVIEW_TIMEOUT: Final = 600.0
_VERDICT: Final = re.compile(
    r"^\W*CRITERION\s+(?P<n>\d+)\s*[:.)-]\s*(?P<verdict>PASS|FAIL)\b\W*(?P<reason>.*)$",
    re.IGNORECASE,
)
_LIST_MARK: Final = re.compile(r"^(?:[-*+]|\d+[.)])\s+")


@attrs.frozen(kw_only=True)
class Reviewer:
    """Who reviews: a profile, or an API endpoint with its key (an isolated config dir)."""

    profile: str | None = None
    endpoint: str | None = None
    key_from: str | None = None
    model: str | None = None
    claude: str = "claude"
    timeout: float = DEFAULT_REVIEW_TIMEOUT

    def __attrs_post_init__(self) -> None:
        if (self.profile is None) == (self.endpoint is None):
            raise SettingsError("a blind reviewer needs a profile or an endpoint (not both)")
        if self.endpoint is not None and self.key_from is None:
            raise SettingsError("a reviewer on an endpoint needs --key-from")

    @property
    def name(self) -> str:
        return self.profile or str(self.endpoint)


@attrs.frozen(kw_only=True)
class CriterionVerdict:
    number: int
    criterion: str
    #: None when the reviewer said nothing of this criterion
    passed: bool | None
    reason: str

    def as_dict(self) -> dict[str, str]:
        verdict = {True: "pass", False: "fail", None: "none"}[self.passed]
        return {"criterion": self.criterion, "verdict": verdict, "reason": self.reason}


def read_criteria(path: Path) -> list[str]:
    """The criteria in a file, one per non-empty line (list marks and headings dropped);
    SettingsError for a file with none."""
    criteria = []
    for line in read_prompt(path, "criteria file").splitlines():
        text = _LIST_MARK.sub("", line.strip()).strip()
        if text and not text.startswith("#"):
            criteria.append(text)
    if not criteria:
        raise SettingsError(f"{path} has no criteria: write one per line")
    return criteria


def review_prompt(criteria: Sequence[str], *, branch: str, base: str | None,
                  inputs: ReviewInput | None = None) -> str:
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, 1))
    since = f"since {base}" if base else "on this branch"
    history = ""
    if inputs is not None:
        history = (
            "\n\nYou have no shell. fleet wrote the history of the work for you, read-only:\n"
            f"- {inputs.log}: the commits (git log --stat)\n"
            f"- {inputs.diff}: the whole change (git diff {since.removeprefix('since ')}"
            "..HEAD)\n"
            f"Read them with the Read tool; read the worktree's files as you need.\n\n"
            f"The commits:\n{inputs.summary}"
        )
    return (
        "You are a blind reviewer. Another agent worked in this git worktree (branch "
        f"{branch}). Judge its work {since} against each criterion below, from the files and "
        "the history of the work only. Change nothing."
        f"{history}\n\n"
        f"Criteria:\n{listed}\n\n"
        "End your answer with exactly one line per criterion, in order, in this form:\n"
        "CRITERION <number>: PASS: <one-sentence reason>\n"
        "CRITERION <number>: FAIL: <what is missing or wrong>\n"
    )


@attrs.frozen(kw_only=True)
class ReviewInput:
    """What fleet rendered for the reviewer: the log and diff files, and the commits in one
    line each for the prompt."""

    log: Path
    diff: Path
    summary: str


def render_input(git: Git, worktree: Path, base: str | None, folder: Path) -> ReviewInput:
    """Write the log and the diff of ``base..HEAD`` (all of HEAD without a base) into
    ``folder``, read-only: what the reviewer reads instead of running git."""
    span = f"{base}..HEAD" if base else "HEAD"
    plain = ("--no-color", "--no-ext-diff", "--no-textconv")
    log = git.run(worktree, "log", *plain, "--stat", span, "--").stdout
    summary = git.run(worktree, "log", "--no-color", "--format=%h %s", span, "--").stdout
    if base:
        diff = git.run(worktree, "diff", *plain, base, "HEAD", "--").stdout
    else:
        diff = git.run(worktree, "show", *plain, "--format=", "HEAD", "--").stdout
    lines = summary.splitlines()
    if len(lines) > _PROMPT_LOG_LINES:
        lines = [*lines[:_PROMPT_LOG_LINES], f"... and {len(lines) - _PROMPT_LOG_LINES} more"]
    folder.mkdir(mode=0o700, exist_ok=True)
    out = ReviewInput(log=folder / "log.txt", diff=folder / "changes.diff",
                      summary="\n".join(printable(line) for line in lines) or "(none)")
    for path, text in ((out.log, log), (out.diff, diff)):
        path.write_text(text, encoding="utf-8", errors="replace")
        path.chmod(0o400)
    folder.chmod(0o500)
    return out


def parse_verdicts(text: str, criteria: Sequence[str]) -> list[CriterionVerdict]:
    """The reviewer's verdict on each criterion: the last line it wrote for each number."""
    said: dict[int, tuple[bool, str]] = {}
    for line in text.splitlines():
        m = _VERDICT.match(line.strip())
        if m and 1 <= int(m["n"]) <= len(criteria):
            said[int(m["n"])] = (m["verdict"].upper() == "PASS", m["reason"].strip()[:300])
    out = []
    for number, criterion in enumerate(criteria, 1):
        passed, reason = said.get(number, (None, "the reviewer gave no verdict"))
        out.append(CriterionVerdict(number=number, criterion=criterion, passed=passed,
                                    reason=reason))
    return out


@attrs.frozen(kw_only=True)
class Review:
    """A review's verdicts, and what it changed (one line each: nothing, for a review that
    left everything as it was), where what was taken back is kept, and what could not be."""

    verdicts: tuple[CriterionVerdict, ...]
    changed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    left: tuple[str, ...] = ()


def run_review(
    state: WorkerState,
    criteria: Sequence[str],
    reviewer: Reviewer,
    *,
    base: str | None,
    environ: Mapping[str, str] | None = None,
    fleet_home: Path | None = None,
    git: Git | None = None,
) -> Review:
    """Run the reviewer to its end in the worker's worktree and read its verdicts; ToolError
    when the run itself failed (no verdict is made up) and changed nothing. Whatever the
    reviewer changed is taken back and reported in the :class:`Review`."""
    if not state.worktree:
        raise SettingsError(f"{state.worker} has no worktree to review")
    environ = dict(os.environ if environ is None else environ)
    git = git or Git()
    worktree = Path(state.worktree)
    fleet_home = fleet_home or resolve_home(environ.get("FLEET_HOME"))
    with tempfile.TemporaryDirectory(prefix="fleet-review-") as scratch:
        root = Path(scratch)
        inputs = render_input(git, worktree, base, root / "input")
        prompt = review_prompt(criteria, branch=state.branch or "?", base=base, inputs=inputs)
        config = None
        if reviewer.endpoint is not None:
            config = root / "config"
            _seed_config(config)
        (root / "home").mkdir(mode=0o700)
        record = LaunchRecord(
            worker=state.worker, tool="claude", worktree=state.worktree,
            branch=state.branch or "", profile=reviewer.profile, model=reviewer.model,
            permission_mode="dontAsk", allowed_tools=READ_ONLY_TOOLS,
            disallowed_tools=DENIED_TOOLS, add_dirs=(str(root / "input"),),
            endpoint=reviewer.endpoint, key_from=reviewer.key_from,
            key_var=default_key_var("claude", reviewer.endpoint) if reviewer.endpoint else None,
            config_dir=str(config) if config else None, claude=reviewer.claude,
        )
        # The scratch home takes the reviewer's hook events: it is not the worker.
        spec = build_run(record, home=root / "home", run=0, prompt=prompt, output_dir=root)
        env = {k: v for k, v in environ.items() if k not in spec.env_unset}
        env.update(spec.env_set)
        if reviewer.key_from is not None:
            key = resolve_key(reviewer.key_from, environ=environ)
            env.update(dict.fromkeys(spec.key_vars, key))
        # No tool but the read-only ones exists in its session, and no MCP server.
        argv = [*spec.argv, f"--tools={','.join(READ_ONLY_TOOLS)}", "--strict-mcp-config"]
        roots = _review_guard.outside_roots(worktree, fleet_home=fleet_home,
                                            user_home=environ.get("HOME"), scratch=root)
        before = _review_guard.take(git, worktree, roots)
        try:
            proc = _run(argv, prompt, cwd=state.worktree, env=env, timeout=reviewer.timeout)
        finally:
            after = _review_guard.take(git, worktree, roots)
            changes = _review_guard.compare(before, after)
            undone = _review_guard.Undone()
            if changes:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                undone = _review_guard.undo(
                    git, worktree, before, changes,
                    keep=fleet_home / "review-leftovers" / f"{state.worker}.{stamp}",
                    keep_ref=f"refs/fleet-review/{state.worker}/{stamp}")
            (root / "input").chmod(0o700)  # so that the scratch can be removed
        changed = tuple(c.describe() for c in changes)
    if proc is None or proc.returncode is None:
        failure = "could not start" if proc is None else f"ran past {reviewer.timeout:g}s"
        if not changed:
            raise ToolError(f"the blind reviewer {failure}")
        return _unjudged(criteria, f"the reviewer {failure}", changed, undone)
    outcome = parse_claude(proc.stdout, proc.stderr, proc.returncode, time.time())
    if outcome.kind != "ok":
        said = " ".join((outcome.result or "no output").split())[:200]
        if not changed:
            raise ToolError(f"the blind reviewer failed ({outcome.kind}): {said}")
        return _unjudged(criteria, f"the reviewer failed ({outcome.kind})", changed, undone)
    return Review(verdicts=tuple(parse_verdicts(outcome.result or "", criteria)),
                  changed=changed, kept=undone.kept, left=undone.left)


@attrs.frozen(kw_only=True)
class _Ran:
    stdout: str
    stderr: str
    #: None: it ran past its timeout (and was killed)
    returncode: int | None


def _run(argv: Sequence[str], prompt: str, *, cwd: str, env: Mapping[str, str],
         timeout: float) -> _Ran | None:
    """The reviewer's run; None when it could not start."""
    try:
        proc = subprocess.run(
            [*argv, prompt], cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, errors="replace", timeout=timeout, check=False,
        )
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired:
        return _Ran(stdout="", stderr="", returncode=None)
    return _Ran(stdout=proc.stdout, stderr=proc.stderr, returncode=proc.returncode)


def _unjudged(criteria: Sequence[str], why: str, changed: tuple[str, ...],
              undone: _review_guard.Undone) -> Review:
    verdicts = tuple(CriterionVerdict(number=n, criterion=c, passed=None, reason=why)
                     for n, c in enumerate(criteria, 1))
    return Review(verdicts=verdicts, changed=changed, kept=undone.kept, left=undone.left)


def _seed_config(config: Path) -> None:
    from fleet import _agent_config
    from fleet._home import DIR_MODE

    config.mkdir(mode=DIR_MODE)
    quiet = {"backup": False, "fsync": False}
    _agent_config.write_json(config / "settings.json", {}, **quiet)
    _agent_config.write_json(config / ".claude.json", {"hasCompletedOnboarding": True}, **quiet)


def findings_of(verdicts: Sequence[CriterionVerdict], *, changed: Sequence[str] = (),
                kept: Sequence[str] = (), left: Sequence[str] = ()) -> tuple[str, ...]:
    """What failed: what the reviewer changed (taken back and where it is kept, or what could
    not be), then one line per criterion the reviewer failed or did not judge."""
    out: list[str] = []
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more"
                                           if len(changed) > 10 else "")
        undone = " (undone" + (f"; kept at {', '.join(kept[:3])}" if kept else "") + ")"
        if left:
            undone = "; could not undo: " + "; ".join(left[:3])
        out.append(f"blind review: a read-only review made changes: {shown}{undone}")
    out.extend(
        f"blind review, criterion {v.number} ({v.criterion[:80]}): {v.reason or 'failed'}"
        for v in verdicts if v.passed is not True
    )
    return tuple(out)
