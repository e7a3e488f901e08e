"""Office operations: changes to tasks and comments that publish events after they commit."""

from __future__ import annotations
