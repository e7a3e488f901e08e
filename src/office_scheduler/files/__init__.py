"""Workspace configuration as files: load, plan, apply and export an office directory.

Layout of a config directory::

    office.yml        workspace (name, description), settings, executors
    agents/*.yml      one agent per file
    projects/*.yml    one project per file
    routines/*.yml    one routine per file, with its triggers

Loading resolves what depends on the machine, so a loaded config is ready to use: ``{python}``
in an executor's argv becomes the running interpreter, argv items starting with ``./`` or
``../`` become absolute paths, and relative project directories are taken from the config
directory. Export writes those resolved values, so import → export → import is lossless.
Import matches existing records by workspace, agent, project and routine name; it creates
and updates, and never deletes a record. A routine's triggers follow its file: missing ones
are created (a new webhook's secret is reported once by :func:`run_import`), matching ones
kept (a webhook keeps its public id and secret), the rest deleted. See ``docs/config-files.md``.
"""

from __future__ import annotations

from office_scheduler.files.export import export_config
from office_scheduler.files.load import EXECUTOR_KINDS, load_config
from office_scheduler.files.model import (
    Action,
    AgentSpec,
    Change,
    ImportPlan,
    ImportResult,
    NewWebhook,
    OfficeConfig,
    ProjectSpec,
    RoutineSpec,
    TriggerSpec,
)
from office_scheduler.files.sync import apply_import, plan_import, run_import

__all__ = [
    "EXECUTOR_KINDS",
    "Action",
    "AgentSpec",
    "Change",
    "ImportPlan",
    "ImportResult",
    "NewWebhook",
    "OfficeConfig",
    "ProjectSpec",
    "RoutineSpec",
    "TriggerSpec",
    "apply_import",
    "export_config",
    "load_config",
    "plan_import",
    "run_import",
]
