"""The final report: one line per worker, from the journal alone.

Each line says who did the work (profile and model), where (workspace and branch), what was
verified (``checked`` or ``failed`` by fleet's check, or only ``claimed`` by the worker), and
whether the worker was retired (with the snapshot ref) or kept, and why. What fleet checked is
always kept apart from what the worker claimed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from fleet._core.attention import exit_why, mode_text, reason_text
from fleet._core.fold import WorkerState
from fleet._fleet import Fleet


@attrs.frozen(kw_only=True)
class ReportLine:
    worker: str
    profile: str | None
    model: str | None
    tool: str | None
    adapter: str | None
    workspace: str | None
    branch: str | None
    state: str
    verdict: str
    outcome: str
    why: str
    findings: tuple[str, ...] = ()
    ref: str | None = None
    task: str | None = None
    follow_ups: int = 0
    #: what changed between retire's last check and the delete, when anything did
    note: str | None = None
    #: the permission mode (or Codex sandbox) fleet started it in
    mode: str | None = None
    #: the blind reviewer that judged the work in its last check, besides the commands
    reviewer: str | None = None


def verdict_of(state: WorkerState) -> str:
    """``checked`` or ``failed`` when fleet judged the claim, ``claimed`` when only the worker
    said so, ``none`` when it never claimed done."""
    if state.state == "done":
        return state.reason if state.reason in ("checked", "failed") else "claimed"
    if state.state == "retired":
        return state.verdict or "claimed"
    return "none"


def _workspace(state: WorkerState) -> str | None:
    for key in ("workspace", "workspace_id", "pane", "pane_id", "terminal", "session"):
        value = state.handle.get(key)
        if value:
            return f"{key} {value}"
    return state.worktree


def _why(state: WorkerState, verdict: str, note: str | None = None) -> str:
    # What fleet checked is kept apart from what a blind reviewer judged besides.
    by = f" by commands and a blind reviewer on {state.reviewer}" if state.reviewer else ""
    if state.state == "retired":
        # A retire that saw something land after its last check says so, never "pushed".
        return f"retired, but {note}" if note else f"was checked{by}, clean and pushed"
    if state.refused:
        return f"retire refused: {state.refused}"
    if verdict == "failed":
        return "check failed: " + "; ".join(state.findings or ("no findings",))
    if verdict == "claimed":
        return "claimed done, not checked yet"
    if verdict == "checked":
        return f"checked{by}, not retired yet"
    why = exit_why(state) if state.state in ("gone", "stopped") else None
    if why:
        return f"not done: {state.state} ({state.reason}): {why}"
    return f"not done: {state.state} ({reason_text(state)})"


def report_line(state: WorkerState) -> ReportLine:
    """One worker's line: every fact it needs is in the folded state."""
    ref, follow_ups, note = state.retired_ref, state.follow_ups, state.retired_note
    verdict = verdict_of(state)
    retired = state.state == "retired"
    why = _why(state, verdict, note if retired else None)
    if follow_ups:
        why += f" (after {follow_ups} follow-up{'' if follow_ups == 1 else 's'})"
    return ReportLine(
        worker=state.worker,
        profile=state.profile,
        model=state.model,
        tool=state.tool,
        adapter=state.adapter,
        workspace=_workspace(state),
        branch=state.branch,
        state=state.state,
        verdict=verdict,
        outcome="retired" if retired else "kept",
        why=why,
        findings=tuple(state.findings),
        ref=ref if retired else None,
        task=state.task,
        follow_ups=follow_ups,
        note=note if retired else None,
        mode=mode_text(state),
        reviewer=state.reviewer,
    )


def build_report(fleet: Fleet, workers: Iterable[str] | None = None) -> list[ReportLine]:
    return [report_line(state) for state in fleet.status(workers)]


HEADERS = ("worker", "profile (model) · mode", "workspace", "branch", "verdict", "outcome", "why")


def _cells(line: ReportLine) -> tuple[str, ...]:
    who = line.profile or "-"
    if line.model:
        who += f" ({line.model})"
    if line.mode:
        who += f" · {line.mode}"
    why = line.why + (f"; snapshot {line.ref}" if line.ref else "")
    return (
        line.worker, who, line.workspace or "-", line.branch or "-", line.verdict, line.outcome,
        why,
    )


def format_line(line: ReportLine) -> str:
    """One worker as a single self-contained line."""
    worker, who, where, branch, verdict, outcome, why = _cells(line)
    return f"{worker}: {who}; {where} @ {branch}; {verdict}; {outcome}: {why}"


def format_report(lines: Sequence[ReportLine], *, width: int | None = None) -> str:
    """A table, one row per worker, and a summary line. With ``width`` (a terminal's), the
    table fits it: the why, the workspace and the branch give up width first."""
    from fleet._text import render_table

    if not lines:
        return "no workers"
    rows = [_cells(line) for line in lines]
    out = [render_table(rows, HEADERS, width=width, shrink=(6, 2, 3, 1))]
    retired = sum(line.outcome == "retired" for line in lines)
    checked = sum(line.verdict == "checked" for line in lines)
    claimed = sum(line.verdict == "claimed" for line in lines)
    failed = sum(line.verdict == "failed" for line in lines)
    out.append("")
    out.append(
        f"{len(lines)} worker{'' if len(lines) == 1 else 's'}: "
        f"{checked} checked, {failed} failed, {claimed} only claimed; "
        f"{retired} retired, {len(lines) - retired} kept"
    )
    return "\n".join(out)
