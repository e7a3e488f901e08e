"""The processing pipeline of a claimed run: an ordered list of small steps (DESIGN §6)."""

from __future__ import annotations
