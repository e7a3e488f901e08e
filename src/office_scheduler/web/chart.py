"""A stacked bar chart drawn on the server as inline SVG (no JavaScript, no chart library).

Each day is one bar; its segments are the runs of each outcome, stacked in the order of
:data:`~office_scheduler.store.dashboard.OUTCOMES`, with a legend and the daily total.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from office_scheduler.store.dashboard import OUTCOMES, DayOutcomes

#: Fill colour of each outcome.
COLOURS = {
    "completed": "#2e7d32",
    "skipped": "#9e9e9e",
    "failed": "#c62828",
    "cancelled": "#ef6c00",
    "open": "#1565c0",
}

WIDTH = 720
HEIGHT = 220
PLOT_TOP = 28
PLOT_BOTTOM = 190
LEFT = 36


def _nice_max(value: int) -> int:
    """The smallest of 1, 2 or 5 times a power of ten at or above ``value`` (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if factor * step >= value:
                return factor * step
        step *= 10


def runs_chart(days: Sequence[DayOutcomes]) -> Markup:
    """An ``<svg>`` of runs per day by outcome; each bar carries a ``<title>`` tooltip.

    Args:
        days: consecutive days, oldest first.

    Returns:
        SVG markup (safe to embed), ``role="img"`` with an accessible label.
    """
    top = _nice_max(max((day.total for day in days), default=0))
    plot_height = PLOT_BOTTOM - PLOT_TOP
    slot = (WIDTH - LEFT - 8) / max(len(days), 1)
    bar = max(slot * 0.7, 2)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="Runs per day for the last {len(days)} days, by outcome">'
    ]
    for tick in (0, top // 2, top):
        y = PLOT_BOTTOM - plot_height * tick / top
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - 4}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>'
        )
    for index, day in enumerate(days):
        x = LEFT + index * slot + (slot - bar) / 2
        y = float(PLOT_BOTTOM)
        label = day.day.strftime("%m-%d")
        for outcome in OUTCOMES:
            count = day.counts.get(outcome, 0)
            if not count:
                continue
            height = plot_height * count / top
            y -= height
            tip = escape(f"{day.day:%Y-%m-%d}: {count} {outcome}")
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                f'fill="{COLOURS[outcome]}" data-outcome="{outcome}" data-count="{count}">'
                f"<title>{tip}</title></rect>"
            )
        parts.append(
            f'<text x="{x + bar / 2:.1f}" y="{PLOT_BOTTOM + 14}" text-anchor="middle">'
            f"{label}</text>"
        )
        if day.total:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                f'class="total">{day.total}</text>'
            )
    legend_x = float(LEFT)
    for outcome in OUTCOMES:
        parts.append(
            f'<rect x="{legend_x:.0f}" y="6" width="10" height="10" fill="{COLOURS[outcome]}"/>'
            f'<text x="{legend_x + 14:.0f}" y="15">{outcome}</text>'
        )
        legend_x += 92
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every interpolated text is escaped or numeric
