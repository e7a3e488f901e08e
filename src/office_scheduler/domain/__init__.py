"""Domain types: frozen dataclasses, status vocabularies and errors. Imports nothing of ours."""

from __future__ import annotations
