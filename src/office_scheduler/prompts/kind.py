"""Full prompt or resume delta: the one decision, in one small function."""

from __future__ import annotations

from enum import StrEnum

from office_scheduler.domain.models import AgentSession, ExecutorConfig

#: ``command`` presets whose agent CLI resumes a session by id (Claude Code ``--resume``,
#: Codex ``exec resume``, Gemini ``--resume``); see ``executors/presets.py``.
RESUMABLE_PRESETS = frozenset({"claude", "codex", "gemini"})


class PromptKind(StrEnum):
    """What a run's prompt is: the whole wake prompt, or the resume delta."""

    FULL = "full"
    DELTA = "delta"


def executor_can_resume(config: ExecutorConfig | None) -> bool:
    """Whether sessions of this executor can be resumed by id.

    True for ``acp`` executors (``session/load``) and for ``command`` executors running a
    resumable preset with no explicit ``argv`` (an explicit ``argv`` wins over the preset,
    and the scheduler cannot know whether a hand-written command line resumes).
    """
    if config is None:
        return False
    if config.kind == "acp":
        return True
    return config.kind == "command" and not config.argv and config.preset in RESUMABLE_PRESETS


def choose_prompt_kind(
    *, task_id: str | None, prior: AgentSession | None, config: ExecutorConfig | None
) -> PromptKind:
    """``delta`` when the run resumes a prior session of the same (task, agent), else ``full``.

    Rules (specification "One-shot session model", "Resume delta prompt"): taskless runs
    never resume; a task-bound run resumes the newest session of its (task, agent) that
    has an external session id, was run by the same executor, and whose executor can
    resume (:func:`executor_can_resume`). Anything else gets the full prompt.

    Args:
        task_id: the run's task, ``None`` for taskless runs.
        prior: ``latest_resumable_session(task, agent)``, or ``None``.
        config: the executor the run will use (``None`` when none resolves).
    """
    if task_id is None or prior is None or config is None:
        return PromptKind.FULL
    if prior.task_id != task_id or not prior.external_session_id:
        return PromptKind.FULL
    if prior.executor != config.name or not executor_can_resume(config):
        return PromptKind.FULL
    return PromptKind.DELTA
