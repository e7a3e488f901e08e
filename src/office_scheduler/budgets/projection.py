"""What the next run of an agent is expected to cost, for the pre-launch budget check.

A run whose spend so far plus its expected cost would reach a blocking policy's limit does
not launch (a run at 95 % of its budget whose runs cost 10 % would end past it). The
expected cost is the agent's ``expected_run_cents`` when set, else the median cost of its
last :data:`RECENT_RUNS` priced runs; an agent with neither is expected to cost nothing, so
only real spend stops it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from office_scheduler.domain.budgets import SUBCENTS_PER_CENT
from office_scheduler.domain.models import Agent
from office_scheduler.store.facade import Store

#: Priced runs whose median is the expected cost of the next one.
RECENT_RUNS = 20


def median_cost(costs: Sequence[int]) -> int:
    """The median of run costs in subcents, rounded half up; 0 for no runs."""
    if not costs:
        return 0
    return int(statistics.median(costs) + 0.5)


def expected_run_subcents(store: Store, agent: Agent) -> int:
    """Blocking: the expected cost of ``agent``'s next run, in subcents (1/100 cent).

    ``expected_run_cents`` on the agent wins; otherwise the median of its last
    :data:`RECENT_RUNS` priced runs.
    """
    if agent.expected_run_cents is not None:
        return agent.expected_run_cents * SUBCENTS_PER_CENT
    return median_cost(store.budgets.recent_run_costs(agent.id, limit=RECENT_RUNS))
