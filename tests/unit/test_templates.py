"""Rendering of routine task templates (pure)."""

from __future__ import annotations

from office_scheduler.domain.routines import TaskTemplate
from office_scheduler.routines.templates import (
    MAX_RENDERED_DESCRIPTION,
    MAX_RENDERED_TITLE,
    render_template,
)


def test_variables_fill_the_title_and_description() -> None:
    rendered = render_template(
        TaskTemplate(title="Review {{repo}}", description="Since {{date}}: {{missing}}"),
        {"repo": "site", "date": "2026-11-29"},
    )
    assert rendered == TaskTemplate(
        title="Review site", description="Since 2026-11-29: {{missing}}"
    )


def test_a_huge_rendering_is_capped_and_marked() -> None:
    """Regression: a webhook variable repeated in the template made descriptions of many MB."""
    body = "x" * 256 * 1024
    rendered = render_template(
        TaskTemplate(title="{{body}}", description="{{body}}" * 100), {"body": body}
    )
    assert len(rendered.title) == MAX_RENDERED_TITLE
    assert len(rendered.description) == MAX_RENDERED_DESCRIPTION
    assert rendered.title.endswith("… [truncated]")
    assert rendered.description.endswith("… [truncated]")
    short = render_template(TaskTemplate(title="t", description="d" * 100), {})
    assert short.description == "d" * 100
