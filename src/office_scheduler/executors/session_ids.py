"""Agent session ids: checked by shape before they are kept or put on a command line.

A session id comes from the agent's own output (``session_id``/``thread_id`` in its JSON
lines), so a hostile or confused agent chooses it. Ids of the preset CLIs have a fixed
shape, and anything else is dropped with a ``session_id_dropped`` run event, so the next
run starts a fresh session instead of resuming:

- ``claude``: a UUID (``system``/``init`` and ``result`` lines; ``--session-id <uuid>``
  in the CLI reference).
- ``gemini``: a UUID (``--resume`` takes ``latest``, an index or a session UUID; the
  scheduler only ever resumes by UUID).
- ``codex``: a UUID (``thread.started {thread_id}``; time-ordered UUIDv7 in practice,
  e.g. ``0199a213-81c0-7800-8aa1-bbab2a035a53``).

A kept id is passed so that it can never be read as an option: ``--resume=<id>`` (one
argument) for Claude and Gemini, whose option parsers take the ``=`` form; Codex's
``exec resume <SESSION_ID>`` takes a positional, which a UUID cannot turn into an option
(it never starts with ``-``). Executors with a hand-written ``argv`` never resume (their
id is kept as reported, never placed on a command line), and ``acp`` session ids are the
agent's own strings, sent only inside JSON-RPC messages (``session/load``), never on a
command line.
"""

from __future__ import annotations

import re
from dataclasses import replace

from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.executors.base import EventSink, ExecutionSink

_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
#: The shape of each preset CLI's session ids.
SHAPES: dict[str, re.Pattern[str]] = {"claude": _UUID, "gemini": _UUID, "codex": _UUID}
#: Characters of a dropped id shown in its run event.
SHOWN_CHARS = 80


def is_valid(preset: str | None, session_id: str) -> bool:
    """Whether ``session_id`` has the shape of the ids of ``preset``'s CLI.

    Args:
        preset: the executor's preset (``None`` or an unknown name: no shape is known and
            the id is never placed on a command line, so any id is kept).
        session_id: the id as the agent reported it.
    """
    shape = SHAPES.get(preset or "")
    return shape is None or shape.fullmatch(session_id) is not None


def resume_args(preset: str, session_id: str) -> list[str]:
    """The command-line arguments that resume ``session_id`` with ``preset``'s CLI.

    Returns:
        The arguments; none for an id :func:`is_valid` refuses (callers screen ids first
        with :func:`screen_launch`, which also notes the event and sends the full prompt).
    """
    if not is_valid(preset, session_id):
        return []
    if preset == "codex":
        return ["resume", session_id]
    return [f"--resume={session_id}"]


async def screen_launch(launch: Launch, sink: ExecutionSink) -> Launch:
    """``launch`` without its resume id when that id has the wrong shape (event noted)."""
    stored = launch.resume_session_id
    if not stored or launch.config.argv or is_valid(launch.config.preset, stored):
        return launch
    await _note_dropped(sink, launch, stored, "resume")
    return replace(launch, resume_session_id=None, resume_cwd=None)


async def screen_outcome(outcome: Outcome, launch: Launch, sink: ExecutionSink) -> Outcome:
    """``outcome`` without its session id when the agent reported a malformed one."""
    reported = outcome.external_session_id
    if not reported or launch.config.argv or is_valid(launch.config.preset, reported):
        return outcome
    await _note_dropped(sink, launch, reported, "reported")
    return replace(outcome, external_session_id=None)


async def _note_dropped(sink: ExecutionSink, launch: Launch, session_id: str, how: str) -> None:
    shown = session_id[:SHOWN_CHARS]
    message = (
        f"dropped the {how} session id {shown!r}: not a {launch.config.preset} session id;"
        " the next run starts a new session"
    )
    if isinstance(sink, EventSink):
        data = {"session_id": shown, "preset": launch.config.preset, "stage": how}
        await sink.event("session_id_dropped", message, data)
    else:
        await sink.output("stderr", f"[session_id_dropped] {message}")
