"""The office store: workspaces, projects, agents, tasks, blockers and comments.

Every public method is one transaction; ids referenced by a record must exist in the same
workspace. The methods are grouped by topic in ``office_workspaces``, ``office_agents``,
``office_tasks`` and ``office_links``; :class:`OfficeStore` is the one class callers use.
"""

from __future__ import annotations

from office_scheduler.store.engine import Database
from office_scheduler.store.office_agents import AgentMethods
from office_scheduler.store.office_common import office_task_clause
from office_scheduler.store.office_links import LinkMethods
from office_scheduler.store.office_tasks import TaskMethods
from office_scheduler.store.office_workspaces import WorkspaceMethods

__all__ = ["OfficeStore", "office_task_clause"]


class OfficeStore(WorkspaceMethods, AgentMethods, TaskMethods, LinkMethods):
    """Repository of the office's records over one :class:`Database`.

    ``Task.is_office`` is computed by the store: a task is an Office task when it is
    project-linked or sits on its workspace's office workflow (:func:`office_task_clause`).
    """

    def __init__(self, db: Database) -> None:
        self._db = db
