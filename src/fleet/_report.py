"""The final report: one line per worker, from the journal alone.

Each line says who did the work (profile and model), where (workspace and branch), what was
verified (``checked`` or ``failed`` by fleet's check, or only ``claimed`` by the worker), and
whether the worker was retired (with the snapshot ref) or kept, and why. What fleet checked is
always kept apart from what the worker claimed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from fleet._core.events import Retired
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


def _why(state: WorkerState, verdict: str) -> str:
    if state.state == "retired":
        return "checked, clean and pushed"
    if state.refused:
        return f"retire refused: {state.refused}"
    if verdict == "failed":
        return "check failed: " + "; ".join(state.findings or ("no findings",))
    if verdict == "claimed":
        return "claimed done, not checked yet"
    if verdict == "checked":
        return "checked, not retired yet"
    return f"not done: {state.state} ({state.reason})"


def report_line(state: WorkerState, ref: str | None = None) -> ReportLine:
    verdict = verdict_of(state)
    retired = state.state == "retired"
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
        why=_why(state, verdict),
        findings=tuple(state.findings),
        ref=ref if retired else None,
        task=state.task,
    )


def build_report(fleet: Fleet, workers: Iterable[str] | None = None) -> list[ReportLine]:
    lines = []
    for state in fleet.status(workers):
        ref = None
        if state.state == "retired":
            for event in reversed(fleet.log(state.worker)):
                if isinstance(event, Retired):
                    ref = event.ref
                    break
        lines.append(report_line(state, ref))
    return lines


def format_line(line: ReportLine) -> str:
    who = line.profile or "-"
    if line.model:
        who += f" ({line.model})"
    where = f"{line.workspace or '-'} @ {line.branch or '-'}"
    outcome = line.outcome + (f" [{line.ref}]" if line.ref else "")
    return f"{line.worker}: {who}; {where}; {line.verdict}; {outcome}: {line.why}"


def format_report(lines: Sequence[ReportLine]) -> str:
    if not lines:
        return "no workers"
    retired = sum(line.outcome == "retired" for line in lines)
    checked = sum(line.verdict in ("checked",) or line.outcome == "retired" for line in lines)
    body = "\n".join(format_line(line) for line in lines)
    return (
        f"{body}\n\n{len(lines)} workers: {checked} checked, {retired} retired, "
        f"{len(lines) - retired} kept"
    )
