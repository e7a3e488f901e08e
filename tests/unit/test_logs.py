"""Logging setup of the CLI: what an exception's log line may show."""

from __future__ import annotations

import pytest
import structlog

from office_scheduler.cli.logs import configure_logging

pytestmark = pytest.mark.usefixtures("restore_logging")


def _fail_holding_a_secret() -> None:
    token = "osr_" + "s3cret-value"  # a local of the failing frame, as in the pipeline
    raise RuntimeError(f"failed after {len(token)} characters")


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_an_exception_log_shows_the_traceback_but_no_local_variables(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(0, fmt)  # type: ignore[arg-type]
    try:
        _fail_holding_a_secret()
    except RuntimeError:
        structlog.get_logger("test").exception("pipeline_failed", run_id=7)
    err = capsys.readouterr().err
    assert "pipeline_failed" in err
    assert "RuntimeError: failed after 16 characters" in err
    assert "_fail_holding_a_secret" in err
    assert "s3cret-value" not in err
