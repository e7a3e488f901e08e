"""A scriptable ACP agent for tests, written with the ``agent-client-protocol`` package.

Run as ``python acp_agent.py``; it speaks ACP on stdin/stdout. Its behaviour comes from the
JSON file named by ``ACP_TEST_SCRIPT`` (an object; every key optional):

* ``mode``: what ``session/prompt`` does —
  ``succeed`` (default: sends ``message`` and ends the turn), ``fail`` (a JSON-RPC internal
  error), ``rate_limit`` (a JSON-RPC error ``rate limit exceeded: try again in 2 minutes``),
  ``auth`` (``Authentication required``), ``hang`` (waits until ``session/cancel``, then
  answers ``cancelled``), ``hang_hard`` (ignores ``session/cancel``), ``crash`` (exits with
  status 3 mid-turn), ``max_tokens``, ``max_turn_requests``, ``refusal`` (those stop reasons);
* ``message``: the agent's reply text (default ``done: <first prompt line>``);
* ``stderr_bytes``: bytes written to stderr before the reply (flood test);
* ``permission``: ``{"title": ..., "kind": ...}`` asks for permission to run that tool
  first; the reply then says ``permission allowed`` or ``permission denied``;
* ``grandchild``: start a ``sleep`` child in the agent's process group during the turn;
* ``no_load``: do not advertise ``loadSession``;
* ``lose_sessions``: ``session/load`` answers ``-32002 Resource not found``;
* ``state_dir``: where sessions are persisted (one JSON transcript per session), so that
  another process can ``session/load`` them; sessions not found there answer ``-32002``;
* ``journal``: a JSON-lines file the agent appends what happened to (``initialize``,
  ``new``, ``load``, ``prompt``, ``permission``, ``cancel``, ``pid``), for assertions;
* ``tool_title``: the title of the tool call the turn reports (default ``Read notes.txt``);
* ``garbage_lines``: write that many non-JSON lines, then a JSON array and a JSON string
  line, on stdout before the reply;
* ``huge_line``: write a line of that many bytes (no JSON) on stdout, then hang;
* ``terminal``: ask the client for ``terminal/create`` first and journal the answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, cast

import acp
from acp import schema
from acp.schema import StopReason


def _load_script() -> dict[str, Any]:
    path = os.environ.get("ACP_TEST_SCRIPT")
    if not path:
        return {}
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


class ScriptedAgent:
    """The agent; one instance per process."""

    def __init__(self, script: dict[str, Any]) -> None:
        self._script = script
        self._state = Path(script.get("state_dir") or Path.cwd() / ".acp-test-sessions")
        self._conn: Any = None
        self._cancelled: dict[str, asyncio.Event] = {}
        self._transcripts: dict[str, list[dict[str, str]]] = {}

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    def _journal(self, event: str, **data: Any) -> None:
        path = self._script.get("journal")
        if path:
            with Path(path).open("a", encoding="utf-8") as out:
                out.write(json.dumps({"event": event, "pid": os.getpid(), **data}) + "\n")

    def _path(self, session_id: str) -> Path:
        return self._state / f"{session_id}.json"

    def _save(self, session_id: str) -> None:
        self._state.mkdir(parents=True, exist_ok=True)
        self._path(session_id).write_text(json.dumps(self._transcripts[session_id]))

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **_: Any,
    ) -> schema.InitializeResponse:
        client = client_info.name if client_info else None
        self._journal("initialize", client=client, env=sorted(os.environ))
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=not self._script.get("no_load")
            ),
            agent_info=schema.Implementation(name="acp-test-agent", version="1"),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        return None

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **_: Any
    ) -> schema.NewSessionResponse:
        session_id = f"sess-{uuid.uuid4().hex[:12]}"
        self._transcripts[session_id] = []
        self._save(session_id)
        self._journal("new", session_id=session_id, cwd=cwd)
        return schema.NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **_: Any
    ) -> schema.LoadSessionResponse:
        path = self._path(session_id)
        if self._script.get("lose_sessions") or not path.is_file():
            self._journal("load", session_id=session_id, found=False)
            raise acp.RequestError.resource_not_found(session_id)
        transcript: list[dict[str, str]] = json.loads(path.read_text())
        self._transcripts[session_id] = transcript
        for entry in transcript:
            if entry["role"] == "user":
                update: Any = acp.update_user_message_text(entry["text"])
            else:
                update = acp.update_agent_message_text(entry["text"])
            await self._conn.session_update(session_id, update)
        self._journal("load", session_id=session_id, found=True, entries=len(transcript))
        return schema.LoadSessionResponse()

    async def cancel(self, session_id: str, **_: Any) -> None:
        self._journal("cancel", session_id=session_id)
        self._cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> schema.PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        self._journal("prompt", session_id=session_id, text=text)
        mode = self._script.get("mode", "succeed")
        if self._script.get("stderr_bytes"):
            self._flood(int(self._script["stderr_bytes"]))
        if self._script.get("grandchild"):
            child = subprocess.Popen(["sleep", "600"])
            self._journal("child", child=child.pid)
        reply = self._script.get("message") or f"done: {text.splitlines()[0] if text else ''}"
        if self._script.get("garbage_lines"):
            garbage = b"".join(b"not json %d\n" % i for i in range(self._script["garbage_lines"]))
            await _write_stdout(garbage + b'[1, 2]\n"a string"\n')
        if self._script.get("huge_line"):
            await _write_stdout(b"x" * int(self._script["huge_line"]) + b"\n")
            await asyncio.sleep(3600)
        if self._script.get("terminal"):
            await self._terminal(session_id)
        if self._script.get("permission"):
            reply = f"{reply} (permission {await self._ask(session_id)})"
        if mode == "fail":
            raise acp.RequestError.internal_error({"details": "the scripted agent failed"})
        if mode == "rate_limit":
            raise acp.RequestError(-32603, "rate limit exceeded: try again in 2 minutes")
        if mode == "auth":
            raise acp.RequestError.auth_required()
        if mode == "crash":
            sys.stderr.write("scripted crash\n")
            sys.stderr.flush()
            os._exit(3)
        if mode in ("hang", "hang_hard"):
            return await self._hang(session_id, hard=mode == "hang_hard")
        await self._conn.session_update(session_id, acp.update_agent_thought_text("thinking"))
        await self._conn.session_update(
            session_id,
            acp.start_tool_call(
                "t1",
                self._script.get("tool_title", "Read notes.txt"),
                kind="read",
                status="completed",
            ),
        )
        await self._conn.session_update(session_id, acp.update_agent_message_text(reply))
        transcript = self._transcripts.setdefault(session_id, [])
        transcript += [{"role": "user", "text": text}, {"role": "agent", "text": reply}]
        self._save(session_id)
        stops: dict[str, StopReason] = {
            "max_tokens": "max_tokens",
            "max_turn_requests": "max_turn_requests",
            "refusal": "refusal",
        }
        return schema.PromptResponse(stop_reason=stops.get(mode, "end_turn"))

    async def _terminal(self, session_id: str) -> None:
        try:
            answer = await self._conn.create_terminal(command="ls", session_id=session_id)
        except acp.RequestError as exc:
            self._journal("terminal", code=exc.code)
        else:
            self._journal("terminal", code=None, answer=repr(answer))

    def _flood(self, total: int) -> None:
        line = b"x" * 1023 + b"\n"
        written = 0
        while written < total:
            os.write(2, line)
            written += len(line)

    async def _ask(self, session_id: str) -> str:
        tool = self._script["permission"]
        options = [
            schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        call = schema.ToolCallUpdate(tool_call_id="p1", title=tool["title"], kind=tool.get("kind"))
        answer = await self._conn.request_permission(session_id, call, options)
        outcome = answer.outcome
        chosen = getattr(outcome, "option_id", None)
        verdict = "allowed" if chosen == "yes" else "denied"
        self._journal("permission", outcome=outcome.outcome, option=chosen, verdict=verdict)
        return verdict

    async def _hang(self, session_id: str, *, hard: bool) -> schema.PromptResponse:
        event = self._cancelled.setdefault(session_id, asyncio.Event())
        if hard:
            await asyncio.sleep(3600)
        await event.wait()
        return schema.PromptResponse(stop_reason="cancelled")


async def _write_stdout(data: bytes) -> None:
    """Write raw bytes on stdout, which the SDK has made non-blocking."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(1, view) :]
        except BlockingIOError:
            await asyncio.sleep(0.001)


def main() -> None:
    """Serve one ACP connection on stdin/stdout."""
    agent = ScriptedAgent(_load_script())
    asyncio.run(acp.run_agent(cast(acp.Agent, agent)))


if __name__ == "__main__":
    main()
