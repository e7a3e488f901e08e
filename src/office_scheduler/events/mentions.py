"""@mentions of agents in comments (pure).

A person's comment that names an agent as ``@<agent name>`` wakes that agent (source
``user``, specification "Wakeup sources": "User mention / explicit wake from the UI").
Agent names are free text, so a mention is ``@`` followed by an agent's whole name, not
preceded by a word character (``mail@host`` mentions nobody) and not followed by one
(``@ann`` does not mention ``an``); letters match regardless of case.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from office_scheduler.domain.models import Agent


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@])@{re.escape(name)}(?![\w-])", re.IGNORECASE)


def mentioned(body: str, agents: Sequence[Agent]) -> list[Agent]:
    """The agents ``body`` @mentions, in the order given, each once.

    Args:
        body: the comment text.
        agents: the agents of the comment's workspace.

    Returns:
        The agents whose ``@name`` occurs in ``body``; a mention of a longer name
        (``@ann smith``) does not also mention a shorter one it starts with (``ann``)
        unless that one is mentioned on its own too.
    """
    if "@" not in body:
        return []
    candidates = sorted(agents, key=lambda agent: len(agent.name), reverse=True)
    found: set[str] = set()
    remaining = body
    for agent in candidates:
        pattern = _pattern(agent.name)
        if pattern.search(remaining):
            found.add(agent.id)
            # A longer name's mention is used up, so ``@ann smith`` is not also ``@ann``.
            remaining = pattern.sub(" ", remaining)
    return [agent for agent in agents if agent.id in found]
