"""The executor contract's records: what a session is launched with and what it reports.

:class:`Launch` goes into an executor, :class:`Outcome` (with its :class:`Usage`) comes out;
the pipeline builds the first and records the second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from office_scheduler.domain.models import JSON, ExecutorConfig
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus, RunReason


@dataclass(frozen=True, kw_only=True, slots=True)
class Launch:
    """Everything an executor needs to run one session.

    Attributes:
        env: the complete environment of the agent process (nothing else is inherited).
        cwd: absolute working directory.
        resume_session_id: external id of the session to resume, when there is one.
        resume_cwd: working directory the resumed session was created in (agents key
            their history by directory); None when there is nothing to resume.
        permission_policy: the agent's permission policy (``acp``), as stored.
        full_prompt: the full wake prompt when ``prompt`` is a resume delta; an executor
            that has to start a new session instead of resuming sends this one.
    """

    run_id: int
    agent_id: str
    task_id: str | None
    workspace_id: str
    prompt: str
    config: ExecutorConfig
    env: dict[str, str]
    cwd: str
    resume_session_id: str | None = None
    resume_cwd: str | None = None
    permission_policy: JSON | None = None
    full_prompt: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens and cost reported by an agent session (cost in 1/100 of a cent, USD).

    ``priced``: true when the session reported a price (even zero), false when it reported
    tokens without one, ``None`` when unknown (then only a non-zero cost counts as priced).
    ``model``: the model the session named, if any.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_subcents: int = 0
    model: str | None = None
    priced: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What one executor session produced.

    Attributes:
        error_family: set when ``status`` is ``failed``.
        retry_not_before: earliest retry instant when the agent said so (rate limits).
        result: the last JSON object the agent printed, if any.
    """

    status: OutcomeStatus
    reason: RunReason = RunReason.COMPLETED
    error_family: ErrorFamily | None = None
    message: str = ""
    retry_not_before: datetime | None = None
    result: JSON | None = None
    external_session_id: str | None = None
    usage: Usage = field(default_factory=Usage)
    exit_code: int | None = None
