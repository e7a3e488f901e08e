"""Our side of an ACP connection: session updates into the run log, permission answers.

Every notification is recorded synchronously when its handler starts, before any
``await``: the SDK runs each notification handler as its own task and ``session/load``
returns without waiting for them, so recording first is what keeps replayed history
(everything received while ``session/load`` is pending) apart from new output.
Records go through an :class:`Outbox`, one writer task, so the run log keeps their order.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from acp import RequestError, schema

from office_scheduler.executors.acp.policy import PermissionPolicy, ToolRequest, tool_name_from_meta
from office_scheduler.executors.base import EventSink, ExecutionSink

#: Structured events (tool calls, plans, replayed lines, permissions) stored per session;
#: the rest are counted in one ``acp_events_truncated`` event.
MAX_EVENTS = 1000
#: Characters of the turn's final agent message kept for the outcome.
MESSAGE_TAIL = 16_000
#: Queued records above which the stderr pump waits for the writer.
HIGH_WATER = 1000


@dataclass(frozen=True, slots=True)
class _Output:
    stream: str
    line: str


@dataclass(frozen=True, slots=True)
class _Event:
    kind: str
    message: str
    data: dict[str, Any]


class Outbox:
    """Ordered, single-writer delivery of records to an :class:`ExecutionSink`.

    ``output``/``event`` never wait (they are called from synchronous handler prologues);
    :meth:`wait_room` lets a bulk producer such as the stderr pump wait for the writer.
    A plain sink (without ``event``) receives events as ``acp`` output lines.
    """

    def __init__(self, sink: ExecutionSink) -> None:
        self._sink = sink
        self._events = sink if isinstance(sink, EventSink) else None
        self._queue: deque[_Output | _Event] = deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._closed = False
        self._stored_events = 0
        self.dropped_events = 0

    def output(self, stream: str, line: str) -> None:
        """Queue one output line (``stream`` such as ``agent``, ``thought``, ``stderr``)."""
        self._put(_Output(stream, line))

    def event(self, kind: str, message: str, **data: Any) -> None:
        """Queue one structured event; past :data:`MAX_EVENTS` it is only counted."""
        if self._stored_events >= MAX_EVENTS:
            self.dropped_events += 1
            return
        self._stored_events += 1
        self._put(_Event(kind, message, data))

    async def wait_room(self) -> None:
        """Wait until the queue is below :data:`HIGH_WATER` records."""
        await self._room.wait()

    async def run(self) -> None:
        """Deliver records until :meth:`close` was called and the queue is empty."""
        while True:
            while self._queue:
                record = self._queue.popleft()
                if len(self._queue) < HIGH_WATER:
                    self._room.set()
                await self._deliver(record)
            if self._closed:
                return
            self._ready.clear()
            await self._ready.wait()

    def close(self) -> None:
        """Let :meth:`run` return once everything queued is delivered."""
        if self.dropped_events:
            self._queue.append(
                _Event(
                    "acp_events_truncated",
                    f"{self.dropped_events} more session events were not stored",
                    {"dropped_events": self.dropped_events},
                )
            )
        self._closed = True
        self._ready.set()

    def _put(self, record: _Output | _Event) -> None:
        self._queue.append(record)
        if len(self._queue) >= HIGH_WATER:
            self._room.clear()
        self._ready.set()

    async def _deliver(self, record: _Output | _Event) -> None:
        if isinstance(record, _Output):
            await self._sink.output(record.stream, record.line)
        elif self._events is not None:
            await self._events.event(record.kind, record.message, record.data)
        else:
            await self._sink.output("acp", f"[{record.kind}] {record.message}")


class _Lines:
    """Joins streamed text chunks into lines, one channel at a time."""

    def __init__(self, emit: Callable[[tuple[bool, str], str], None]) -> None:
        self._emit = emit
        self._channel: tuple[bool, str] | None = None
        self._partial = ""

    def add(self, channel: tuple[bool, str], text: str) -> None:
        if channel != self._channel:
            self.flush()
            self._channel = channel
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            self._emit(channel, line)

    def flush(self) -> None:
        if self._channel is not None and self._partial:
            self._emit(self._channel, self._partial)
        self._partial = ""


class OfficeClient:
    """The ACP client the executor connects with (structurally an ``acp.Client``).

    Attributes:
        replaying: True while ``session/load`` is pending; updates then count as replay.
        message: text of the agent's messages in the current (new) turn.
    """

    def __init__(self, outbox: Outbox, policy: PermissionPolicy, touch: Callable[[], None]):
        self._outbox = outbox
        self._policy = policy
        self._touch = touch
        self._lines = _Lines(self._emit_line)
        self.replaying = False
        self.message = ""
        self.replayed = 0
        #: True once the agent answered in this turn (text, thought, tool call or plan).
        self.answered = False
        self.cost: dict[str, Any] | None = None

    def on_connect(self, conn: Any) -> None:
        """Called by the SDK when the connection starts; nothing to do."""

    def flush(self) -> None:
        """Emit the partial line still buffered (call when a phase or the session ends)."""
        self._lines.flush()

    # We advertise no terminal capability; an agent that asks anyway gets -32601 rather
    # than the SDK's default ``null`` result (which reads as success).
    async def create_terminal(self, **kwargs: Any) -> None:
        """``terminal/create``: not offered (JSON-RPC -32601 method not found)."""
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, **kwargs: Any) -> None:
        """``terminal/output``: not offered (JSON-RPC -32601 method not found)."""
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, **kwargs: Any) -> None:
        """``terminal/release``: not offered (JSON-RPC -32601 method not found)."""
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, **kwargs: Any) -> None:
        """``terminal/wait_for_exit``: not offered (JSON-RPC -32601 method not found)."""
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, **kwargs: Any) -> None:
        """``terminal/kill``: not offered (JSON-RPC -32601 method not found)."""
        raise RequestError.method_not_found("terminal/kill")

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Record one ``session/update`` notification (see the module docstring)."""
        self._touch()
        replay = self.replaying
        kind = str(getattr(update, "session_update", "unknown"))
        answers = (
            schema.AgentMessageChunk
            | schema.AgentThoughtChunk
            | schema.ToolCallStart
            | schema.ToolCallProgress
            | schema.AgentPlanUpdate
        )
        if not replay and isinstance(update, answers):
            self.answered = True
        chunks = schema.UserMessageChunk | schema.AgentMessageChunk | schema.AgentThoughtChunk
        if isinstance(update, chunks):
            self._chunk(replay, kind, update.content)
        elif isinstance(update, schema.ToolCallStart | schema.ToolCallProgress):
            self._tool(replay, kind, update)
        elif isinstance(update, schema.AgentPlanUpdate):
            self._plan(replay, update)
        elif isinstance(update, schema.UsageUpdate) and update.cost is not None:
            self.cost = update.cost.model_dump(mode="json")

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        """Answer a permission request from the agent's policy and log the decision."""
        self._touch()
        self._lines.flush()
        request = ToolRequest(
            tool_call_id=tool_call.tool_call_id,
            title=tool_call.title or "",
            kind=tool_call.kind,
            name=tool_name_from_meta(tool_call.field_meta),
        )
        allowed = self._policy.allows(request)
        wanted = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
        option = next((o for k in wanted for o in options if o.kind == k), None)
        outcome: schema.AllowedOutcome | schema.DeniedOutcome
        if option is not None:
            outcome = schema.AllowedOutcome(outcome="selected", option_id=option.option_id)
        else:
            # No option says what we decided: withdraw the request instead of guessing.
            outcome = schema.DeniedOutcome(outcome="cancelled")
        decision = "allowed" if allowed and option is not None else "denied"
        self._outbox.event(
            "acp_permission",
            f"{decision}: {request.title or request.name or request.tool_call_id}",
            decision=decision,
            tool_call_id=request.tool_call_id,
            title=request.title,
            tool_kind=request.kind,
            tool_name=request.name,
            option_id=option.option_id if option is not None else None,
            policy=self._policy.describe(),
        )
        return schema.RequestPermissionResponse(outcome=outcome)

    def _chunk(self, replay: bool, kind: str, content: Any) -> None:
        text = getattr(content, "text", None)
        if not isinstance(text, str):
            text = f"[{getattr(content, 'type', 'content')}]\n"
        if not replay and kind == "agent_message_chunk":
            self.message = (self.message + text)[-MESSAGE_TAIL:]
        if not replay and kind == "user_message_chunk":
            return  # an echo of our own prompt
        self._lines.add((replay, kind), text)

    def _emit_line(self, channel: tuple[bool, str], line: str) -> None:
        replay, kind = channel
        if replay:
            self.replayed += 1
            self._outbox.event("acp_replay", line, update=kind, replay=True)
        elif kind == "agent_thought_chunk":
            self._outbox.output("thought", line)
        else:
            self._outbox.output("agent", line)

    def _tool(self, replay: bool, kind: str, update: Any) -> None:
        self._lines.flush()
        title = update.title or ""
        status = update.status or ""
        data = {"tool_call_id": update.tool_call_id, "title": title, "status": status}
        data["tool_kind"] = update.kind
        label = f"{title or update.tool_call_id}" + (f" [{status}]" if status else "")
        if replay:
            self.replayed += 1
            self._outbox.event("acp_replay", label, update=kind, replay=True, **data)
        else:
            event = "acp_tool_call" if kind == "tool_call" else "acp_tool_call_update"
            self._outbox.event(event, label, **data)

    def _plan(self, replay: bool, update: schema.AgentPlanUpdate) -> None:
        self._lines.flush()
        entries = [
            {"content": e.content, "status": e.status, "priority": e.priority}
            for e in update.entries
        ]
        summary = "; ".join(f"[{e['status']}] {e['content']}" for e in entries)
        if replay:
            self.replayed += 1
            self._outbox.event("acp_replay", summary, update="plan", replay=True, entries=entries)
        else:
            self._outbox.event("acp_plan", summary, entries=entries)


def parse_result(message: str) -> dict[str, Any]:
    """The run's result JSON from the turn's final message.

    A message that is one JSON object (as the ``command`` executor's agents print) is the
    result itself; any other text becomes ``{"result": text}``.
    """
    text = message.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    last = text.rsplit("\n{", 1)
    if len(last) == 2:
        try:
            tail = json.loads("{" + last[1])
        except ValueError:
            tail = None
        if isinstance(tail, dict):
            return tail
    return {"result": text}


def merge_meta(base: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """``base`` plus ``extra`` keys that are not None (result JSON decoration)."""
    merged = dict(base)
    merged.update({k: v for k, v in extra.items() if v is not None})
    return merged
