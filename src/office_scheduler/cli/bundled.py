"""Where the demo office and the sample agent are: in the package, or in a source checkout.

A wheel carries the repository's ``examples/`` as ``office_scheduler/_examples`` (see
``pyproject.toml``); a source checkout (editable install) uses ``examples/`` itself.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]


def examples_root() -> Path:
    """The directory holding ``demo-office/`` and ``agents/sample_agent.py``."""
    bundled = _PACKAGE / "_examples"
    if bundled.is_dir():
        return bundled
    return _PACKAGE.parents[1] / "examples"


def demo_office() -> Path:
    """The demo office's config directory."""
    return examples_root() / "demo-office"


def sample_agent() -> Path:
    """The sample agent script (reads its prompt on stdin, acts through ``office``)."""
    return examples_root() / "agents" / "sample_agent.py"
