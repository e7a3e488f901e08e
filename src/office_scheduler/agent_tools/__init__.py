"""Tools agents use to act on the office: the MCP server behind ``office mcp``.

Named ``agent_tools`` (not ``mcp``) so that it never shadows the ``mcp`` library.
"""

from __future__ import annotations
