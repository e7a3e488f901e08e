"""What in-process CLI tests share: an environment without the caller's ``OFFICE_*``."""

from __future__ import annotations

#: Environment overrides that unset every variable the ``office`` command reads.
CLEAN_ENV: dict[str, str | None] = {
    name: None
    for name in (
        "OFFICE_HOME",
        "OFFICE_DATABASE_URL",
        "OFFICE_API_URL",
        "OFFICE_TOKEN",
        "OFFICE_AGENT_ID",
        "OFFICE_WORKSPACE_ID",
        "OFFICE_TASK_ID",
        "OFFICE_LOG_FORMAT",
    )
}
