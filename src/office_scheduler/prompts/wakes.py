"""The "Why you were woken" section: the merged wakes, bounded, each with its payload.

Each wake source gets a title and, where its payload says more than ids, a few readable
lines (missed ticks, rejection context, approval decisions, agent errors, budget alerts);
the sanitized payload itself always follows as a fenced JSON block. Payload vocabularies:
specification "Wakeup sources".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from office_scheduler.domain.models import Comment, ContextEntry, RunWakes
from office_scheduler.domain.status import WakeSource
from office_scheduler.prompts.text import (
    MAX_FIELD_CHARS,
    clean,
    fenced,
    one_line,
    payload_json,
)

SOURCE_TITLES = {
    "routine": "A routine fired",
    "comment": "A new comment was posted on your task",
    "agent_error": "An agent's session failed",
    "self": "You asked to be woken",
    "user": "A person woke you",
    "task_assigned": "A task was assigned to you",
    "task_blockers_resolved": "All blockers of your task are done",
    "task_children_completed": "All subtasks of your task are finished",
    "approval_resolved": "An approval you requested was decided",
    "budget_alert": "A budget threshold was crossed",
    "queue_run": "A run was queued for you",
}

#: Keys of a ``rejection`` object shown as readable lines, in this order.
_REJECTION_KEYS = ("by", "decided_by", "from_state", "to_state", "approval_id")
#: Keys of a ``rejection`` object whose (longer, free) text is quoted.
_REJECTION_TEXT_KEYS = ("reason", "note", "decision_note", "comment")


def _text(value: Any, limit: int = 200) -> str:
    return one_line(str(value), limit=limit)


def _name(agent_id: Any, names: Mapping[str, str]) -> str:
    ident = _text(agent_id, 60)
    name = names.get(str(agent_id))
    return f"{_text(name, 100)} ({ident})" if name else ident


def _quoted(label: str, value: Any) -> list[str]:
    """``label:`` followed by ``value`` cleaned and fenced (indented under the entry)."""
    text = clean(str(value), limit=MAX_FIELD_CHARS)
    return [f"   {label}:", *fenced(text, indent="   ")]


def _routine(payload: Mapping[str, Any], _names: Mapping[str, str]) -> list[str]:
    lines = [f"   Routine {_text(payload.get('routine_id', '?'), 60)}."]
    missed = payload.get("missed_ticks")
    if isinstance(missed, Mapping):
        count = missed.get("count", "?")
        exact = "" if missed.get("exact", True) else "at least "
        since = _text(missed.get("since", "?"), 40)
        lines.append(
            f"   Missed ticks: {exact}{_text(count, 20)} tick(s) since {since} were not fired "
            "while no scheduler ran; this fire stands for them."
        )
    return lines


def _rejection_lines(rejection: Any) -> list[str]:
    lines = ["   Your work was sent back (rejected); rejection context:"]
    if isinstance(rejection, Mapping):
        for key in _REJECTION_KEYS:
            value = rejection.get(key)
            if value is not None:
                lines.append(f"   - {key}: {_text(value)}")
        for key in _REJECTION_TEXT_KEYS:
            if rejection.get(key):
                lines += _quoted(key, rejection[key])
    elif rejection not in (None, "", True):
        lines += _quoted("reason", rejection)
    return lines


def _comment(
    payload: Mapping[str, Any],
    names: Mapping[str, str],
    comments: Mapping[str, Comment],
    listed: AbstractSet[str],
) -> list[str]:
    lines: list[str] = []
    comment_id = str(payload.get("comment_id", ""))
    comment = comments.get(comment_id)
    if comment_id in listed:
        lines.append(f"   Comment {_text(comment_id, 60)} is quoted with the comments below.")
    elif comment is not None:
        author = (
            _name(comment.author_agent_id, names)
            if comment.author_agent_id
            else comment.author_kind.value
        )
        lines += _quoted(f"Comment by {author}", comment.body)
    if "rejection" in payload:
        lines += _rejection_lines(payload["rejection"])
    return lines


def _agent_error(payload: Mapping[str, Any], names: Mapping[str, str]) -> list[str]:
    who = _name(payload.get("failed_agent_id", "?"), names)
    where = []
    if payload.get("run_id") is not None:
        where.append(f"run {_text(payload['run_id'], 30)}")
    if payload.get("failed_session_id"):
        where.append(f"session {_text(payload['failed_session_id'], 60)}")
    lines = [f"   Failed agent: {who}" + (f" ({', '.join(where)})" if where else "") + "."]
    if payload.get("error"):
        lines += _quoted("Error", payload["error"])
    return lines


def _approval(payload: Mapping[str, Any], _names: Mapping[str, str]) -> list[str]:
    status = _text(payload.get("status", "?"), 40)
    lines = [f"   Approval {_text(payload.get('approval_id', '?'), 60)} was {status}."]
    if payload.get("decided_by"):
        lines.append(f"   Decided by: {_text(payload['decided_by'])}.")
    if payload.get("decision_note"):
        lines += _quoted("Decision note", payload["decision_note"])
    return lines


def _budget(payload: Mapping[str, Any], names: Mapping[str, str]) -> list[str]:
    agent = payload.get("agent_instance_id") or payload.get("agent_id")
    pct = payload.get("budget_pct", payload.get("percent"))
    subject = f"Agent {_name(agent, names)}" if agent else "A budget scope"
    used = f" has used {_text(pct, 20)}% of its budget" if pct is not None else " crossed a limit"
    return [f"   {subject}{used}."]


def _blockers_resolved(payload: Mapping[str, Any], _names: Mapping[str, str]) -> list[str]:
    ids = payload.get("resolved_blocker_ids")
    if isinstance(ids, list) and ids:
        return [f"   Resolved blockers: {', '.join(_text(i, 60) for i in ids[:25])}."]
    return []


def _self(payload: Mapping[str, Any], _names: Mapping[str, str]) -> list[str]:
    return _quoted("Your reason", payload["reason"]) if payload.get("reason") else []


def _user(payload: Mapping[str, Any], _names: Mapping[str, str]) -> list[str]:
    lines = [f"   By user {_text(payload['user_id'], 100)}."] if payload.get("user_id") else []
    if payload.get("context"):
        lines += _quoted("Context", payload["context"])
    if payload.get("reason"):
        lines += _quoted("Reason", payload["reason"])
    return lines


def _assigned(payload: Mapping[str, Any], _names: Mapping[str, str]) -> list[str]:
    lines = []
    if payload.get("role") == "reviewer":
        lines.append(
            "   You are a reviewer of this task: review the work and approve or reject it."
        )
    if payload.get("recovery"):
        lines.append("   Re-dispatched by the recovery sweep: earlier work on it did not finish.")
    return lines


_DETAILS = {
    "routine": _routine,
    "agent_error": _agent_error,
    "approval_resolved": _approval,
    "budget_alert": _budget,
    "task_blockers_resolved": _blockers_resolved,
    "self": _self,
    "user": _user,
    "task_assigned": _assigned,
}


def wake_entry(
    index: int,
    entry: ContextEntry,
    *,
    names: Mapping[str, str],
    comments: Mapping[str, Comment],
    listed: AbstractSet[str] = frozenset(),
) -> list[str]:
    """Lines of one merged wake: title, readable details, then the payload as JSON.

    A ``comment`` wake quotes its comment from ``comments`` unless its id is in ``listed``
    (the prompt quotes it with the other comments).
    """
    source = entry.source.value
    title = SOURCE_TITLES.get(source, source)
    lines = [
        f"{index}. **{source}** at {entry.requested_at.isoformat()} (wake request "
        f"{entry.request_id}): {title}."
    ]
    payload: Mapping[str, Any] = entry.payload
    if source == "comment":
        lines += _comment(payload, names, comments, listed)
    elif source in _DETAILS:
        lines += _DETAILS[source](payload, names)
    if source != "comment" and "rejection" in payload:
        lines += _rejection_lines(payload["rejection"])
    lines += ["   Payload:", *fenced(payload_json(entry.payload), info="json", indent="   ")]
    return lines


#: Default budget of the section: entries shown in full, and UTF-8 bytes (workspace
#: settings ``prompt_max_wakes`` / ``prompt_max_wake_bytes``).
DEFAULT_MAX_WAKES = 20
DEFAULT_MAX_WAKE_BYTES = 12_000
#: Bytes kept free for each per-source summary line while choosing the entries.
_SUMMARY_LINE_RESERVE = 300


def _size(lines: Sequence[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _chosen(
    wakes: RunWakes,
    render: Callable[[ContextEntry], list[str]],
    *,
    max_wakes: int,
    budget: int,
) -> list[ContextEntry]:
    """The entries shown in full: decision-carrying ones, the newest, then newer first.

    Decision-carrying wakes and the newest wake are always shown; other wakes, newest
    first, while fewer than ``max_wakes`` are shown and their lines fit in ``budget``.
    """
    newest_first = sorted(wakes.entries, key=lambda entry: entry.request_id, reverse=True)
    keep = {entry.request_id for entry in newest_first if entry.request_id in wakes.decisions}
    if newest_first:
        keep.add(newest_first[0].request_id)
    used = sum(_size(render(entry)) for entry in newest_first if entry.request_id in keep)
    for entry in newest_first:
        if len(keep) >= max_wakes:
            break
        if entry.request_id in keep:
            continue
        size = _size(render(entry))
        if used + size > budget:
            break
        keep.add(entry.request_id)
        used += size
    return [entry for entry in reversed(newest_first) if entry.request_id in keep]


def _tally_line(wakes: RunWakes) -> str:
    counts = ", ".join(f"{tally.source.value} {tally.count:,}" for tally in wakes.tallies)
    return f"{wakes.total:,} wakes were merged into this run; by source: {counts}."


def _summary_lines(wakes: RunWakes, shown: Sequence[ContextEntry], run_id: int) -> list[str]:
    """One line per source with wakes not shown: how many, first and last time, where."""
    shown_of: dict[WakeSource, int] = {}
    for entry in shown:
        shown_of[entry.source] = shown_of.get(entry.source, 0) + 1
    lines: list[str] = []
    for tally in wakes.tallies:
        rest = tally.count - shown_of.get(tally.source, 0)
        if rest <= 0:
            continue
        lines.append(
            f"- {tally.source.value}: {rest:,} more not shown ({tally.count:,} in all, first "
            f"at {tally.first_at.isoformat()}, last at {tally.last_at.isoformat()}); "
            f"read them all with `office wakeups list --run {run_id}`."
        )
    return lines


def wake_section(
    wakes: RunWakes,
    *,
    run_id: int,
    names: Mapping[str, str],
    comments: Sequence[Comment] = (),
    listed: AbstractSet[str] = frozenset(),
    max_wakes: int = DEFAULT_MAX_WAKES,
    max_bytes: int = DEFAULT_MAX_WAKE_BYTES,
) -> list[str]:
    """The "Why you were woken" section, bounded however many wakes the run absorbed.

    Shown in full, oldest first: the newest wakes up to ``max_wakes`` entries and
    ``max_bytes`` UTF-8 bytes of the section, and always the newest wake and every
    decision-carrying wake the bounded read returned (approval results, rejections, agent
    errors, budget alerts, missed-tick summaries; with the comment a rejection refers to
    quoted). When some are left out, the section says how many wakes were merged per
    source, and ends with one line per source summarising the rest: how many, the first
    and last time, and the command that lists them all (``office wakeups list --run N``).

    Args:
        wakes: the run's merged wakes (bounded view).
        run_id: the run they were merged into.
        names: agent id → name.
        comments: comments a ``comment`` wake may quote.
        listed: ids of comments the prompt quotes elsewhere (not repeated here).
        max_wakes: most entries shown in full (decision-carrying ones count too).
        max_bytes: the section's budget in UTF-8 bytes (the newest wake and the
            decision-carrying ones are shown even past it).
    """
    by_id = {comment.id: comment for comment in comments}

    def render(entry: ContextEntry, index: int = 0) -> list[str]:
        return wake_entry(index, entry, names=names, comments=by_id, listed=listed)

    header = [f"## Why you were woken ({wakes.total} wake(s) merged into run {run_id})"]
    if not wakes.entries:
        return [*header, "No wake reason was recorded."]
    budget = max_bytes - _size(header) - _SUMMARY_LINE_RESERVE * (len(wakes.tallies) + 1)
    shown = _chosen(wakes, render, max_wakes=max_wakes, budget=budget)
    rest = _summary_lines(wakes, shown, run_id)
    if rest:
        header += [
            _tally_line(wakes),
            f"Shown in full: {len(shown)} of them (the newest, and every one that carries a "
            "decision); the others are summarised per source after them.",
        ]
    lines = list(header)
    for index, entry in enumerate(shown, start=1):
        lines += render(entry, index)
    if rest:
        lines += ["", "Not shown in full:", *rest]
    return lines
