"""Logging: structlog over the standard library, one renderer for both, on stderr.

Quiet by default (warnings and errors only); ``-v`` shows info, ``-vv`` debug. The format
is a console renderer for people or JSON lines for log collectors.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Literal, TextIO

if TYPE_CHECKING:
    from structlog.typing import Processor

LogFormat = Literal["console", "json"]

_LEVELS = {0: logging.WARNING, 1: logging.INFO}


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at emit time (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(verbosity: int = 0, fmt: LogFormat = "console") -> None:
    """Route structlog and stdlib records (uvicorn, alembic...) through one stderr handler.

    Args:
        verbosity: 0 = warnings, 1 = info, 2 or more = debug.
        fmt: ``console`` (readable) or ``json`` (one object per line).
    """
    # Imported here: `office --help` configures no logging and should not pay for structlog.
    import structlog

    level = _LEVELS.get(verbosity, logging.DEBUG)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    renderer: Processor
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if fmt == "json":
        final += [structlog.processors.format_exc_info]
        renderer = structlog.processors.JSONRenderer()
    else:
        # Plain tracebacks: the default (rich) one prints every frame's local variables,
        # which include run tokens and agent environments.
        renderer = structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[*final, renderer],
    )
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old, _StderrHandler):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # uvicorn's access log is noise at the default level; -vv shows it.
    logging.getLogger("uvicorn.access").setLevel(level if verbosity >= 2 else logging.WARNING)
