"""A blind review of a worker's work: a headless Claude Code run on a third profile (neither the
worker's nor the coordinator's), with read-only tools, in the worker's worktree, that judges the
work against written criteria without seeing the worker's own account of it.

The reviewer is told the criteria, the branch and its base, nothing else; it answers one line
per criterion (``CRITERION 2: FAIL: no test covers the empty input``), which
:func:`parse_verdicts` reads. Its session's hooks write into a scratch fleet home: the review
is not the worker, and nothing it does reaches the worker's journal.
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

from fleet._core.fold import WorkerState
from fleet._core.results import parse_claude
from fleet._errors import SettingsError, ToolError
from fleet._files import read_prompt
from fleet._keys import resolve_key
from fleet.adapters._headless_run import LaunchRecord, build_run, default_key_var

#: What a reviewer may do: read the worktree and its history, change nothing.
READ_ONLY_TOOLS: Final = (
    "Read", "Grep", "Glob",
    "Bash(git diff:*)", "Bash(git log:*)", "Bash(git show:*)", "Bash(git status:*)",
)
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


def review_prompt(criteria: Sequence[str], *, branch: str, base: str | None) -> str:
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, 1))
    since = f"since {base}" if base else "on this branch"
    return (
        "You are a blind reviewer. Another agent worked in this git worktree (branch "
        f"{branch}). Judge its work {since} against each criterion below, from the files and "
        "the git history only (git diff, git log, git show; read files as you need). Change "
        "nothing.\n\n"
        f"Criteria:\n{listed}\n\n"
        "End your answer with exactly one line per criterion, in order, in this form:\n"
        "CRITERION <number>: PASS: <one-sentence reason>\n"
        "CRITERION <number>: FAIL: <what is missing or wrong>\n"
    )


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


def run_review(
    state: WorkerState,
    criteria: Sequence[str],
    reviewer: Reviewer,
    *,
    base: str | None,
    environ: Mapping[str, str] | None = None,
) -> list[CriterionVerdict]:
    """Run the reviewer to its end in the worker's worktree and read its verdicts; ToolError
    when the run itself failed (no verdict is made up)."""
    if not state.worktree:
        raise SettingsError(f"{state.worker} has no worktree to review")
    environ = dict(os.environ if environ is None else environ)
    prompt = review_prompt(criteria, branch=state.branch or "?", base=base)
    with tempfile.TemporaryDirectory(prefix="fleet-review-") as scratch:
        root = Path(scratch)
        config = None
        if reviewer.endpoint is not None:
            config = root / "config"
            _seed_config(config)
        record = LaunchRecord(
            worker=state.worker, tool="claude", worktree=state.worktree,
            branch=state.branch or "", profile=reviewer.profile, model=reviewer.model,
            permission_mode="dontAsk", allowed_tools=READ_ONLY_TOOLS,
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
        try:
            proc = subprocess.run(
                [*spec.argv, prompt], cwd=state.worktree, env=env, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, errors="replace", timeout=reviewer.timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ToolError(f"cannot start the reviewer: {exc.filename} not found") from None
        except subprocess.TimeoutExpired:
            raise ToolError(f"the blind reviewer ran past {reviewer.timeout:g}s") from None
    outcome = parse_claude(proc.stdout, proc.stderr, proc.returncode, time.time())
    if outcome.kind != "ok":
        said = " ".join((outcome.result or "no output").split())[:200]
        raise ToolError(f"the blind reviewer failed ({outcome.kind}): {said}")
    return parse_verdicts(outcome.result or "", criteria)


def _seed_config(config: Path) -> None:
    from fleet import _agent_config
    from fleet._home import DIR_MODE

    config.mkdir(mode=DIR_MODE)
    quiet = {"backup": False, "fsync": False}
    _agent_config.write_json(config / "settings.json", {}, **quiet)
    _agent_config.write_json(config / ".claude.json", {"hasCompletedOnboarding": True}, **quiet)


def findings_of(verdicts: Sequence[CriterionVerdict]) -> tuple[str, ...]:
    """What failed, one line per criterion the reviewer failed or did not judge."""
    return tuple(
        f"blind review, criterion {v.number} ({v.criterion[:80]}): {v.reason or 'failed'}"
        for v in verdicts if v.passed is not True
    )
