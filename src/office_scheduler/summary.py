"""The continuation summary builder (pure; specification "Continuation summary").

A per-(agent, scope) markdown body with exactly four sections, composed by the scheduler
(never written by the agent) from structured inputs after each successful taskless run:

- ``## Active focus``: what the agent watches, the workspace activity counts and the last
  run's result line (2-3 lines).
- ``## Open blockers``: one bullet per stuck task: blocker, what unblocks it, when surfaced.
- ``## Recent decisions``: the last five date-stamped result lines, newest first; the
  previous body supplies the older ones (continuity).
- ``## Next action``: one sentence from :func:`infer_next_action`.

Same inputs → same bytes: nothing here reads a clock; the date stamp is the run's finish
time, passed in. The body is capped at 8 KB of UTF-8 by dropping whole bullets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from office_scheduler.domain.models import ContextEntry
from office_scheduler.domain.status import WakeSource
from office_scheduler.domain.summaries import (
    AGENT_SCOPE,
    ROUTINE_SCOPE_PREFIX,
    ActiveBlocker,
    ActivityStats,
)
from office_scheduler.prompts.text import clip_bytes, estimate_tokens, one_line

#: Cap of the whole body, in UTF-8 bytes.
MAX_SUMMARY_BYTES = 8192
#: Decisions kept in "Recent decisions".
MAX_DECISIONS = 5
#: Longest single bullet or line, in UTF-8 bytes.
MAX_LINE_BYTES = 600
#: Blockers listed before the rest are counted only.
MAX_BLOCKERS = 20
#: Keys of the result JSON tried in order for the run's result text.
RESULT_FALLBACK = ("summary", "result", "message", "error")
DEFAULT_NEXT_ACTION = "Continue monitoring."

SECTIONS = ("## Active focus", "## Open blockers", "## Recent decisions", "## Next action")

_DECISION = re.compile(r"^- (\d{4}-\d{2}-\d{2} \d{2}:\d{2}Z)(?: \(run (\d+)\))?: (.+)$")
_ERROR_STATUSES = frozenset({"error", "failed", "failure"})
_BLOCKED_STATUSES = frozenset({"blocked", "needs_input", "waiting"})
_ENDED = {
    "ok": "succeeded",
    "error": "succeeded but reported an error",
    "blocked": "succeeded but reported being blocked",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class SummaryInput:
    """Everything one summary is built from.

    Attributes:
        agent_name: shown in "Active focus".
        scope: ``routine:<routine_id>`` or ``agent``.
        run_id: the successful run the summary follows.
        finished_at: that run's end (aware; rendered in UTC) — the decision date stamp.
        result: the run's result JSON (``None`` when the agent printed none).
        stats: workspace activity since the previous summary.
        blockers: stuck tasks of the agents this agent manages, oldest change first.
        previous: the previous summary body ("" when there is none).
        agent_names: agent id → name, for blocker assignees.
        scope_label: how the scope reads in "Active focus" (e.g. the routine's name).
    """

    agent_name: str
    scope: str
    run_id: int
    finished_at: datetime
    result: Mapping[str, Any] | None
    stats: ActivityStats
    blockers: Sequence[ActiveBlocker] = ()
    previous: str = ""
    agent_names: Mapping[str, str] = field(default_factory=dict)
    scope_label: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BuiltSummary:
    """A built body and its estimated tokens (UTF-8 bytes / 4, rounded up)."""

    content: str
    content_tokens: int


def summary_scope(context: Sequence[ContextEntry]) -> str:
    """The summary scope of a taskless run: ``routine:<id>`` of its first routine wake.

    A run with no routine wake among its merged wakes (a self, user or error wake) uses
    the agent-wide scope ``agent``.
    """
    for entry in context:
        if entry.source is WakeSource.ROUTINE:
            routine_id = entry.payload.get("routine_id")
            if isinstance(routine_id, str) and routine_id:
                return f"{ROUTINE_SCOPE_PREFIX}{routine_id}"[:200]
    return AGENT_SCOPE


def result_text(result: Mapping[str, Any] | None) -> str | None:
    """The first non-empty of ``summary`` → ``result`` → ``message`` → ``error``, as text.

    Non-string values are rendered as compact JSON-ish text; whitespace is folded.
    """
    if not result:
        return None
    for key in RESULT_FALLBACK:
        value = result.get(key)
        if value is None or value == "" or value == {} or value == []:
            continue
        if not isinstance(value, str):
            value = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        text = one_line(value, limit=2000)
        if text:
            return text
    return None


def _last_status(result: Mapping[str, Any] | None) -> str:
    """``error``, ``blocked`` or ``ok`` from the result JSON's status (or its keys)."""
    if not result:
        return "ok"
    status = str(result.get("status", "")).strip().lower()
    if status in _ERROR_STATUSES:
        return "error"
    if status in _BLOCKED_STATUSES:
        return "blocked"
    if not any(result.get(key) for key in RESULT_FALLBACK[:3]) and result.get("error"):
        return "error"
    return "ok"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def infer_next_action(
    stats: ActivityStats, blockers: Sequence[ActiveBlocker], result: Mapping[str, Any] | None
) -> str:
    """One sentence from the decision table on (workspace state, last run status).

    First matching row wins:

    ============================================  ==========================================
    condition                                     next action
    ============================================  ==========================================
    last run reported an error                    investigate that error first
    last run reported being blocked               resolve what blocked it
    agent-error escalations in the window         review the escalated failures
    budget signals in the window                  check budget usage before more work
    an open blocker                               unblock the oldest blocked task
    failed runs in the window                     look into the failed runs
    no open tasks and some completed              plan the next piece of work
    otherwise                                     "Continue monitoring."
    ============================================  ==========================================
    """
    status = _last_status(result)
    if status == "error":
        return "Investigate the error the last run reported before starting new work."
    if status == "blocked":
        return "Resolve what blocked the last run, or ask a person for the missing input."
    if stats.agent_error_escalations:
        return (
            f"Review the {_plural(stats.agent_error_escalations, 'escalated agent failure')} "
            "and reassign or unblock their tasks."
        )
    if stats.budget_signals:
        return "Check budget usage before assigning more work."
    if blockers:
        first = blockers[0]
        need = ""
        if first.waiting_on:
            need = f" (waiting on {one_line(first.waiting_on[0], limit=120)})"
        return f"Unblock task {one_line(first.title, limit=120)}{need}."
    if stats.failed_runs:
        return f"Look into the {_plural(stats.failed_runs, 'failed run')} since the last summary."
    if stats.open_tasks == 0 and stats.completed_tasks:
        return "Plan the next piece of work: every open task is done."
    return DEFAULT_NEXT_ACTION


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%MZ")


def _line(text: str) -> str:
    return clip_bytes(text, MAX_LINE_BYTES)


def previous_decisions(previous: str) -> list[tuple[str, int | None, str]]:
    """The ``(stamp, run_id, text)`` bullets of a body's "Recent decisions", in order."""
    found: list[tuple[str, int | None, str]] = []
    inside = False
    for line in previous.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Recent decisions"
            continue
        match = _DECISION.match(line) if inside else None
        if match:
            run = int(match.group(2)) if match.group(2) else None
            found.append((match.group(1), run, match.group(3)))
    return found


def _focus(data: SummaryInput) -> list[str]:
    stats = data.stats
    label = one_line(data.scope_label or data.scope, limit=120)
    lines = [
        f"{one_line(data.agent_name, limit=120)} keeps watch over {label}; since "
        f"{_stamp(stats.since)}: {_plural(stats.completed_tasks, 'task')} completed, "
        f"{_plural(stats.failed_runs, 'run')} failed, "
        f"{_plural(stats.agent_error_escalations, 'agent-error escalation')}, "
        f"{_plural(stats.budget_signals, 'budget signal')}; "
        f"{_plural(stats.open_tasks, 'actionable task')} open.",
    ]
    ended = _ENDED[_last_status(data.result)]
    lines.append(f"Last run {data.run_id} ({_stamp(data.finished_at)}) {ended}.")
    return [_line(line) for line in lines]


def _blocker_bullets(data: SummaryInput) -> list[str]:
    bullets = []
    for blocker in data.blockers:
        who = data.agent_names.get(blocker.assignee_agent_id or "", blocker.assignee_agent_id)
        need = (
            "needs " + ", ".join(one_line(t, limit=100) for t in blocker.waiting_on) + " done"
            if blocker.waiting_on
            else f"state {blocker.state}: needs someone to unblock it"
        )
        bullets.append(
            _line(
                f"- {one_line(blocker.title, limit=150)} (task {blocker.task_id}, "
                f"{one_line(who or 'unassigned', limit=80)}): {need}; surfaced "
                f"{_stamp(blocker.since)}"
            )
        )
    return bullets


def _decision_bullets(data: SummaryInput, text: str | None) -> list[str]:
    bullets = []
    if text:
        bullets.append(_line(f"- {_stamp(data.finished_at)} (run {data.run_id}): {text}"))
    for stamp, run, old in previous_decisions(data.previous):
        if run == data.run_id:
            continue  # this run's own decision from an earlier build of the same summary
        ref = f" (run {run})" if run is not None else ""
        bullets.append(_line(f"- {stamp}{ref}: {old}"))
    return bullets[:MAX_DECISIONS]


def _render(
    focus: list[str], blockers: list[str], hidden: int, decisions: list[str], action: str
) -> str:
    blocker_lines = blockers or ["- None."]
    if hidden:
        blocker_lines = [*blocker_lines, f"- … and {hidden} more stuck task(s)."]
    parts = [
        SECTIONS[0],
        *focus,
        "",
        SECTIONS[1],
        *blocker_lines,
        "",
        SECTIONS[2],
        *(decisions or ["- None yet."]),
        "",
        SECTIONS[3],
        action,
    ]
    return "\n".join(parts) + "\n"


def build_summary(data: SummaryInput) -> BuiltSummary:
    """Compose the summary body (deterministic: the same inputs give the same bytes).

    Over 8 KB, whole bullets are dropped: blockers from the newest (counted in an
    "… and N more" line), then the oldest decisions, keeping at least one of each.

    Returns:
        The body and its estimated tokens.
    """
    text = result_text(data.result)
    focus = _focus(data)
    listed = _blocker_bullets(data)
    blockers, hidden = listed[:MAX_BLOCKERS], max(len(listed) - MAX_BLOCKERS, 0)
    decisions = _decision_bullets(data, text)
    action = _line(infer_next_action(data.stats, data.blockers, data.result))
    body = _render(focus, blockers, hidden, decisions, action)
    while len(body.encode("utf-8")) > MAX_SUMMARY_BYTES:
        if len(blockers) > 1:
            blockers, hidden = blockers[:-1], hidden + 1
        elif len(decisions) > 1:
            decisions = decisions[:-1]
        else:  # unreachable with the per-line caps; kept as a hard guarantee
            body = clip_bytes(body, MAX_SUMMARY_BYTES)
            break
        body = _render(focus, blockers, hidden, decisions, action)
    return BuiltSummary(content=body, content_tokens=estimate_tokens(body))
