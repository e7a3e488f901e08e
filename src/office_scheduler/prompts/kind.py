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


def can_resume(
    *,
    task_id: str | None,
    prior: AgentSession | None,
    config: ExecutorConfig | None,
    cwd: str | None = None,
) -> bool:
    """Whether a run resumes ``prior``: the one rule behind the prompt kind and the launch.

    Rules (specification "One-shot session model", "Resume delta prompt"): taskless runs
    never resume; a task-bound run resumes the newest session of its (task, agent) that
    has an external session id, was run by the same executor (another executor's session
    id means nothing to this one), whose executor can resume (:func:`executor_can_resume`)
    and that ran in the same working directory (agent CLIs keep sessions per directory).
    A prior session without a recorded ``cwd`` or a caller that passes no ``cwd`` skips
    the directory check.

    Args:
        task_id: the run's task, ``None`` for taskless runs.
        prior: ``latest_resumable_session(task, agent)``, or ``None``.
        config: the executor the run will use (``None`` when none resolves).
        cwd: the absolute working directory the run will use, when known.
    """
    if task_id is None or prior is None or config is None:
        return False
    if prior.task_id != task_id or not prior.external_session_id:
        return False
    if prior.executor != config.name or not executor_can_resume(config):
        return False
    return cwd is None or prior.cwd is None or prior.cwd == cwd


def choose_prompt_kind(
    *,
    task_id: str | None,
    prior: AgentSession | None,
    config: ExecutorConfig | None,
    cwd: str | None = None,
) -> PromptKind:
    """``delta`` when the run resumes a prior session of the same (task, agent), else ``full``.

    The decision is :func:`can_resume` (the launch uses the same function to pass the
    session id on, so the prompt and the session never disagree).

    Args:
        task_id: the run's task, ``None`` for taskless runs.
        prior: ``latest_resumable_session(task, agent)``, or ``None``.
        config: the executor the run will use (``None`` when none resolves).
        cwd: the absolute working directory the run will use, when known.
    """
    resumes = can_resume(task_id=task_id, prior=prior, config=config, cwd=cwd)
    return PromptKind.DELTA if resumes else PromptKind.FULL
