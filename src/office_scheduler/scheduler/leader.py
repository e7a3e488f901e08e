"""The leader loop: renews (or tries to take) the maintenance leader's lease.

The holder renews every third of ``leader_ttl``; a node that does not lead looks every
``min(leader_ttl / 3, maintenance_interval)``, so it takes an expired lease within the TTL
plus that pause, and pokes the maintenance loop at once when it does. The renewal runs in
its own loop so a long maintenance pass never delays it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from office_scheduler.config import Settings
from office_scheduler.scheduler.loop import OwnedLoop
from office_scheduler.store.leadership import Leadership


def _no_poke() -> None:
    return None


class LeaderLoop(OwnedLoop):
    """Runs :meth:`Leadership.ensure` periodically (PostgreSQL only).

    Args:
        leadership: the lease this process renews or tries to take.
        settings: ``leader_ttl`` and ``maintenance_interval``.
        on_taken: called when this process has just become leader (pokes maintenance).
    """

    def __init__(
        self,
        *,
        leadership: Leadership,
        settings: Settings,
        on_taken: Callable[[], None] = _no_poke,
    ) -> None:
        self._leadership = leadership
        self._settings = settings
        self._on_taken = on_taken
        super().__init__(name="leader-loop")

    def pause_s(self, leading: bool) -> float:
        """Seconds until the next renewal (leading) or the next look (not leading)."""
        third = self._leadership.ttl.total_seconds() / 3
        if leading:
            return third
        return min(third, self._settings.maintenance_interval.total_seconds())

    async def run_pass(self) -> float:
        """Renew or try to take the lease; returns the pause before the next pass."""
        was = self._leadership.held
        leading = await asyncio.to_thread(self._leadership.ensure)
        if leading and not was:
            self._on_taken()
        return self.pause_s(leading)

    async def stop(self) -> None:
        """Stop renewing, then release the lease so another node takes it at once."""
        await super().stop()
        await asyncio.to_thread(self._leadership.release)
