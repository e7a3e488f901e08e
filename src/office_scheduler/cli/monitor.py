"""Live progress of an office for the terminal, fed by the service's event bus.

One line per wake (source, agent, created/coalesced/deduplicated), per run start and per run
end (status, reason, summary or error); runs that end without launching are shown as skips.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from office_scheduler.domain.events import RunEnded, RunStarted, WakeupReceived
from office_scheduler.domain.models import Run
from office_scheduler.domain.status import IntakeOutcome, RunReason, RunStatus
from office_scheduler.events.bus import EventBus
from office_scheduler.store.facade import Store

Echo = Callable[[str], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """What the monitor saw of one run."""

    run: Run
    launched: bool
    seconds: float | None
    #: Sources of the wakes merged into the run, when the pipeline said (else the run's).
    sources: tuple[str, ...] = ()


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class ProgressMonitor:
    """Prints progress lines and remembers every run it saw.

    Args:
        store: used to look up task titles.
        agent_names: agent id → name, for readable lines.
        echo: where lines go.
        clock: monotonic seconds, for elapsed times.
    """

    def __init__(
        self,
        store: Store,
        agent_names: Mapping[str, str],
        *,
        echo: Echo,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._names = dict(agent_names)
        self._echo = echo
        self._clock = clock
        self._t0 = clock()
        self._titles: dict[str, str] = {}
        self._created: set[int] = set()
        self._started: dict[int, float] = {}
        self.ended: dict[int, RunRecord] = {}

    def register(self, bus: EventBus) -> None:
        """Subscribe to the wake and run events of ``bus``."""
        bus.subscribe(self.on_wake, WakeupReceived)
        bus.subscribe(self.on_run_started, RunStarted)
        bus.subscribe(self.on_run_ended, RunEnded)

    @property
    def open_runs(self) -> set[int]:
        """Runs created while watching that have not ended yet."""
        return self._created - set(self.ended)

    def agent(self, agent_id: str | None) -> str:
        """The agent's name (or its id when unknown)."""
        if agent_id is None:
            return "-"
        return self._names.get(agent_id, agent_id[:8])

    async def title(self, task_id: str | None) -> str:
        """The task's title, cached."""
        if task_id is None:
            return "(no task)"
        if task_id not in self._titles:
            task = await asyncio.to_thread(self._store.office.find_task, task_id)
            self._titles[task_id] = task.title if task is not None else task_id[:8]
        return self._titles[task_id]

    def _line(self, kind: str, text: str) -> None:
        self._echo(f"[{self._clock() - self._t0:6.1f}s] {kind:<8} {text}")

    async def on_wake(self, event: WakeupReceived) -> None:
        """A wake request went through intake."""
        run = event.run
        if event.outcome is IntakeOutcome.CREATED and run is not None:
            self._created.add(run.id)
        request = event.request
        outcome = {
            IntakeOutcome.CREATED: f"created run {run.id if run else '-'}",
            IntakeOutcome.COALESCED: f"coalesced into run {run.id if run else '-'}",
            IntakeOutcome.DEDUPLICATED: "deduplicated (already received)",
            IntakeOutcome.HELD: f"held ({request.status_reason})",
        }[event.outcome]
        title = await self.title(request.task_id)
        self._line(
            "wake",
            f"{request.source.value} → {self.agent(request.agent_id)}: {outcome} "
            f"— {_short(title, 48)}",
        )

    async def on_run_started(self, event: RunStarted) -> None:
        """A run launched its agent session."""
        run = event.run
        self._started[run.id] = self._clock()
        title = await self.title(run.task_id)
        self._line(
            "start",
            f"run {run.id}: {self.agent(run.agent_id)} on {_short(title, 48)!r} "
            f"({run.source.value}; {run.coalesced_count} wake(s))",
        )

    async def on_run_ended(self, event: RunEnded) -> None:
        """A run reached its terminal state."""
        run = event.run
        began = self._started.pop(run.id, None)
        seconds = None if began is None else self._clock() - began
        known = event.wake_sources
        sources = tuple(sorted(s.value for s in known)) if known else (run.source.value,)
        self.ended[run.id] = RunRecord(
            run=run, launched=began is not None, seconds=seconds, sources=sources
        )
        reason = run.reason.value if run.reason else "-"
        who = self.agent(run.agent_id)
        if began is None and run.status is not RunStatus.FAILED:
            self._line("skip", f"run {run.id}: {who} not launched ({run.status.value}: {reason})")
            return
        took = f" in {seconds:.1f}s" if seconds is not None else ""
        if run.status is RunStatus.FINISHED and run.reason is RunReason.COMPLETED:
            summary = _summary(run.result)
            self._line(
                "done",
                f"run {run.id}: {who} completed{took}" + (f" — {summary}" if summary else ""),
            )
            return
        error = f" — {_short(run.error or '', 80)}" if run.error else ""
        self._line("end", f"run {run.id}: {who} {run.status.value} ({reason}){took}{error}")


def _summary(result: Mapping[str, Any] | None) -> str:
    if not result:
        return ""
    for key in ("summary", "result", "message"):
        value = result.get(key)
        if isinstance(value, str) and value.strip():
            return _short(value, 90)
    return ""


def files_in(directory: Path) -> list[tuple[str, int]]:
    """Every file under ``directory`` as (relative path, size), sorted."""
    if not directory.is_dir():
        return []
    return sorted(
        (str(path.relative_to(directory)), path.stat().st_size)
        for path in directory.rglob("*")
        if path.is_file()
    )
