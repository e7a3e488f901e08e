"""Headless answers to an ACP agent's ``session/request_permission`` (per-agent policy).

An agent's ``permission_policy`` is stored as JSON on the agent::

    {"mode": "allow_all"}                                    # every tool call is allowed
    {"mode": "deny"}                                         # every request is rejected
    {"mode": "allow_listed", "tools": ["read", "Bash(git *)"]}

A ``tools`` entry matches a tool call when it equals the call's ACP tool kind (``read``,
``edit``, ``delete``, ``move``, ``search``, ``execute``, ``think``, ``fetch``,
``switch_mode``, ``other``), or when it matches the call's title or tool name as a
case-insensitive shell-style pattern (``*``, ``?``, ``[...]``). Without a stored policy
:data:`DEFAULT_POLICY` applies: read-only tools (``read``, ``search``, ``think``) are allowed,
everything else is rejected, so an unattended agent never edits or executes anything
its owner did not allow.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from office_scheduler.domain.errors import InvalidInputError

Mode = Literal["allow_all", "deny", "allow_listed"]
MODES: tuple[Mode, ...] = ("allow_all", "deny", "allow_listed")


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """What the agent asks permission for, reduced to what the policy looks at.

    Attributes:
        tool_call_id: the agent's id of the tool call.
        title: human-readable title (``Read README.md``, ``git status``), may be empty.
        kind: ACP tool kind, or None when the agent did not say.
        name: the tool's own name when the agent put one in ``_meta`` (``toolName``).
    """

    tool_call_id: str
    title: str
    kind: str | None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class PermissionPolicy:
    """How permission requests are answered for one agent.

    Attributes:
        mode: ``allow_all``, ``deny`` or ``allow_listed``.
        tools: kinds or title/name patterns allowed in ``allow_listed`` mode.
    """

    mode: Mode
    tools: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: object) -> PermissionPolicy:
        """Read a stored policy; None gives :data:`DEFAULT_POLICY`.

        Raises:
            InvalidInputError: not an object, an unknown ``mode``, or ``tools`` not a list of
                non-empty strings (``field`` is ``permission_policy``).
        """
        if data is None:
            return DEFAULT_POLICY
        if not isinstance(data, Mapping):
            raise _invalid("must be an object with a mode")
        unknown = sorted(set(data) - {"mode", "tools"})
        if unknown:
            raise _invalid(f"unknown key {unknown[0]!r}")
        mode = data.get("mode")
        if mode not in MODES:
            raise _invalid(f"mode must be one of {', '.join(MODES)}")
        tools = data.get("tools", [])
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            raise _invalid("tools must be a list of non-empty strings")
        return cls(mode=mode, tools=tuple(tools))

    def allows(self, request: ToolRequest) -> bool:
        """Tell whether ``request`` is allowed under this policy."""
        if self.mode == "allow_all":
            return True
        if self.mode == "deny":
            return False
        return any(_matches(pattern, request) for pattern in self.tools)

    def describe(self) -> str:
        """A short human description (``allow_listed: read, search``)."""
        if self.mode != "allow_listed":
            return self.mode
        return f"allow_listed: {', '.join(self.tools) or '(nothing)'}"


#: Applied to agents without a stored policy: read-only tools only.
DEFAULT_POLICY = PermissionPolicy(mode="allow_listed", tools=("read", "search", "think"))


def _invalid(message: str) -> InvalidInputError:
    return InvalidInputError(f"permission_policy: {message}", field="permission_policy")


def _matches(pattern: str, request: ToolRequest) -> bool:
    folded = pattern.casefold()
    if request.kind is not None and folded == request.kind.casefold():
        return True
    names = [text for text in (request.title, request.name) if text]
    return any(fnmatch.fnmatchcase(text.casefold(), folded) for text in names)


def tool_name_from_meta(meta: Mapping[str, Any] | None) -> str | None:
    """Find a ``toolName`` string in an ACP ``_meta`` object (top level or one level down)."""
    if not meta:
        return None
    candidates: Iterable[Any] = [meta, *(v for v in meta.values() if isinstance(v, Mapping))]
    for item in candidates:
        name = item.get("toolName")
        if isinstance(name, str) and name:
            return name
    return None
