"""Readable Slack messages for notification events (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_LABELS = {
    "approval.requested": "Approval requested",
    "agent.error": "Agent error",
    "agent.paused": "Agent paused",
    "account.action_required": "Account needs attention",
    "budget.alert": "Budget alert",
    "budget.exceeded": "Budget exceeded",
    "executor.missing": "Executor missing",
    "task.review": "Task waits for review",
    "wake.held": "Wake held",
    "worktree.kept": "Worktree kept",
    "run.failed": "Run failed",
    "task.done": "Task done",
    "notification.test": "Test notification",
}


def _headline(data: Mapping[str, Any]) -> str:
    for key in ("title", "error", "body"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().splitlines()[0][:300]
    return ""


def slack_message(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Slack incoming-webhook body of one delivery payload.

    Args:
        payload: ``{"type", "timestamp", "data"}``; ``data.dashboard_url``, when present,
            becomes a link.

    Returns:
        ``{"text": ...}`` in Slack's mrkdwn: the event's label in bold, the headline, and
        ``<url|Open in the dashboard>``.
    """
    event = str(payload.get("type", ""))
    data = payload.get("data") or {}
    label = _LABELS.get(event, event)
    lines = [f"*{label}*"]
    headline = _headline(data)
    if headline:
        lines.append(headline)
    if event == "run.failed" and data.get("run_id") is not None:
        lines.append(f"run {data['run_id']} ended {data.get('reason') or 'failed'}")
    url = data.get("dashboard_url")
    if isinstance(url, str) and url:
        lines.append(f"<{url}|Open in the dashboard>")
    return {"text": "\n".join(lines)}
