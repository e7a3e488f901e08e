"""``python -m office_scheduler`` runs the ``office`` command line."""

from __future__ import annotations

from office_scheduler.cli import main

main()
