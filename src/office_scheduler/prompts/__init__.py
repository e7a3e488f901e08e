"""Prompt assembly (pure functions): the full wake prompt and the resume delta.

:func:`build_prompt` names why the agent was woken (the merged wakes with their payloads,
bounded: the newest and every decision-carrying one in full, the rest summarised), the
task, project and workspace, the agent's instructions, for taskless runs a slice of the
continuation summary, and how to act (:func:`act_route`: the office MCP tools where the
executor wires them in, else the ``office`` command). :func:`build_delta_prompt` is what
a resumed session gets: only what is new. :func:`choose_prompt_kind` decides between
them. See ``docs/prompts.md``.
"""

from __future__ import annotations

from office_scheduler.prompts.acting import ActRoute, act_route, how_to_act
from office_scheduler.prompts.delta import DeltaInput, TaskSnapshot, build_delta_prompt
from office_scheduler.prompts.full import (
    MAX_COMMENTS,
    SUMMARY_SLICE_CHARS,
    PromptInput,
    build_prompt,
    summary_slice,
)
from office_scheduler.prompts.kind import (
    PromptKind,
    can_resume,
    choose_prompt_kind,
    executor_can_resume,
)
from office_scheduler.prompts.text import estimate_tokens

__all__ = [
    "MAX_COMMENTS",
    "SUMMARY_SLICE_CHARS",
    "ActRoute",
    "DeltaInput",
    "PromptInput",
    "PromptKind",
    "TaskSnapshot",
    "act_route",
    "build_delta_prompt",
    "build_prompt",
    "can_resume",
    "choose_prompt_kind",
    "estimate_tokens",
    "executor_can_resume",
    "how_to_act",
    "summary_slice",
]
