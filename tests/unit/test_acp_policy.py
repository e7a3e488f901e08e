"""The ACP permission policy: parsing the stored JSON and matching tool calls."""

from __future__ import annotations

import pytest

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.executors.acp.policy import (
    DEFAULT_POLICY,
    PermissionPolicy,
    ToolRequest,
    tool_name_from_meta,
)

EDIT = ToolRequest(tool_call_id="1", title="Edit src/app.py", kind="edit")
BASH = ToolRequest(tool_call_id="2", title="git status", kind="execute", name="Bash")
READ = ToolRequest(tool_call_id="3", title="Read README.md", kind="read")


def test_no_stored_policy_allows_read_only_tools() -> None:
    policy = PermissionPolicy.from_json(None)

    assert policy is DEFAULT_POLICY
    assert [policy.allows(r) for r in (EDIT, BASH, READ)] == [False, False, True]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mode": "allow_all"}, [True, True, True]),
        ({"mode": "deny"}, [False, False, False]),
        ({"mode": "allow_listed", "tools": ["EDIT"]}, [True, False, False]),
        ({"mode": "allow_listed", "tools": ["git *"]}, [False, True, False]),
        ({"mode": "allow_listed", "tools": ["bash"]}, [False, True, False]),
        ({"mode": "allow_listed", "tools": ["read *", "edit src/*"]}, [True, False, True]),
        ({"mode": "allow_listed"}, [False, False, False]),
    ],
)
def test_policies_match_kinds_titles_and_tool_names(
    data: dict[str, object], expected: list[bool]
) -> None:
    policy = PermissionPolicy.from_json(data)

    assert [policy.allows(r) for r in (EDIT, BASH, READ)] == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("allow_all", "must be an object"),
        ({"mode": "sometimes"}, "mode must be one of allow_all, deny, allow_listed"),
        ({"mode": "deny", "extra": 1}, "unknown key 'extra'"),
        ({"mode": "allow_listed", "tools": "read"}, "tools must be a list"),
        ({"mode": "allow_listed", "tools": ["read", ""]}, "tools must be a list"),
    ],
)
def test_invalid_policies_name_the_field(data: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as raised:
        PermissionPolicy.from_json(data)

    assert raised.value.field == "permission_policy"


def test_tool_names_are_found_in_meta() -> None:
    assert tool_name_from_meta({"claudeCode": {"toolName": "Bash"}}) == "Bash"
    assert tool_name_from_meta({"toolName": "Edit"}) == "Edit"
    assert tool_name_from_meta({"other": 1}) is None
    assert tool_name_from_meta(None) is None
