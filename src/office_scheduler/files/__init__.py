"""Workspace configuration as files: load, plan, apply and export an office directory.

Layout of a config directory::

    office.yml        workspace (name, description), settings, executors
    agents/*.yml      one agent per file
    projects/*.yml    one project per file

Loading resolves what depends on the machine, so a loaded config is ready to use: ``{python}``
in an executor's argv becomes the running interpreter, argv items starting with ``./`` or
``../`` become absolute paths, and relative project directories are taken from the config
directory. Export writes those resolved values, so import → export → import is lossless.
Import matches existing records by workspace, agent and project name; it creates and
updates, and never deletes.
"""

from __future__ import annotations

from office_scheduler.files.export import export_config
from office_scheduler.files.load import EXECUTOR_KINDS, load_config
from office_scheduler.files.model import (
    Action,
    AgentSpec,
    Change,
    ImportPlan,
    OfficeConfig,
    ProjectSpec,
)
from office_scheduler.files.sync import apply_import, plan_import

__all__ = [
    "EXECUTOR_KINDS",
    "Action",
    "AgentSpec",
    "Change",
    "ImportPlan",
    "OfficeConfig",
    "ProjectSpec",
    "apply_import",
    "export_config",
    "load_config",
    "plan_import",
]
