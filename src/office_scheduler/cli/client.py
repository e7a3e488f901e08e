"""The HTTP client of the client commands (``office task …``, ``office runs …``).

Server errors become :class:`CliError`: bad input (400, 422) exits 2, every other failure
(401, 403, 404, 409, 5xx, an unreachable server) exits 1, each with a one-line reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import click

from office_scheduler.cli import id_prefix
from office_scheduler.cli.state import CliError, CliState, state

if TYPE_CHECKING:
    import httpx

API = "/api/v1"
#: Entity ids are 32 lowercase hex digits (``store.ids.new_id``); anything else is a name.
_ID = re.compile(r"[0-9a-f]{32}")
PAGE_SIZE = 100
BAD_INPUT = frozenset({400, 422})
#: Bearer tokens are visible ASCII (RFC 6750 ``b64token`` is a subset): anything else cannot
#: be sent in a header, or would split it.
_TOKEN_CHARS = frozenset(chr(code) for code in range(0x21, 0x7F))


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot travel in a request (``None`` when it can).

    Empty text and NUL characters are refused, and so is text that is not valid UTF-8
    (lone surrogates, which is how Python hands over undecodable argv bytes).
    """
    if not value or "\x00" in value:
        return "must be non-empty text without NUL characters"
    try:
        value.encode()
    except UnicodeEncodeError:
        return "is not valid UTF-8 text"
    return None


def checked_text(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback refusing what :func:`text_problem` refuses (usage error, exit 2)."""
    if value is not None and (problem := text_problem(value)) is not None:
        raise click.BadParameter(problem, param=param)
    return value


def api_path(*segments: str) -> str:
    """The API path of ``segments``, each URL-quoted as one path segment.

    ``api_path("tasks", task_id, "comments")`` is ``/tasks/<quoted id>/comments``: an id such
    as ``../agents/ID/pause?`` stays one segment and cannot name another route.

    Raises:
        CliError: a segment is empty, holds NUL or is not valid UTF-8 (exit 2).
    """
    for segment in segments:
        if (problem := text_problem(segment)) is not None:
            shown = repr(segment) if len(segment) <= 60 else repr(segment[:60]) + "…"
            raise CliError(f"the id {shown} {problem}", 2)
    return "".join("/" + quote(segment, safe="") for segment in segments)


def bearer_header(token: str, source: str) -> dict[str, str]:
    """The ``Authorization`` header for ``token``.

    Raises:
        CliError: the token holds spaces, control or non-ASCII characters (exit 2);
            ``source`` names where it came from in the message.
    """
    if not set(token) <= _TOKEN_CHARS:
        raise CliError(f"{source} must be printable ASCII without spaces or control characters", 2)
    return {"Authorization": f"Bearer {token}"}


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or error.get("code") or "request failed")
        where = f" (field {error['field']})" if error.get("field") else ""
        return f"{message}{where}"
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return f"HTTP {response.status_code} {response.reason_phrase}".strip()


class ApiClient:
    """Calls the office HTTP API with a bearer token.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8700``.
        token: bearer token; requests go out without one when ``None``.
        timeout_s: per-request timeout.
        token_source: where the token came from, named when it is unusable (default
            ``OFFICE_TOKEN``).
        missing_token_hint: added to a 401 answer when no token was sent (where one is
            looked for).

    Raises:
        CliError: the token cannot be sent in a header (exit 2).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout_s: float = 30.0,
        token_source: str | None = None,
        missing_token_hint: str = "",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._missing_token_hint = "" if token else missing_token_hint
        headers = bearer_header(token, token_source or "OFFICE_TOKEN") if token else {}
        # Imported here: `office <group> --help` builds no client and should not pay for it.
        import httpx

        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> Any:
        """Send one request to ``/api/v1`` + ``path`` and return the decoded JSON body.

        Raises:
            CliError: the server is unreachable (exit 1), refused the input (exit 2) or
                failed the operation (exit 1).
        """
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if not path.startswith("/ids/"):
            path = id_prefix.expand_path(path, self.ids_with_prefix)
            query = id_prefix.expand_fields(query, self.ids_with_prefix) or {}
            body = id_prefix.expand_fields(body, self.ids_with_prefix)
        import httpx

        try:
            response = self._http.request(method, API + path, params=query, json=body)
        except httpx.ConnectError:
            raise CliError(f"cannot reach the office server at {self.base_url}") from None
        except httpx.TimeoutException:
            raise CliError(f"the office server at {self.base_url} did not answer in time") from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL):
            raise CliError(
                f"--api-url {self.base_url!r} is not a server URL: use http://HOST:PORT", 2
            ) from None
        except httpx.HTTPError as exc:
            raise CliError(f"request to {self.base_url} failed: {exc}") from None
        except UnicodeEncodeError:
            # A lone surrogate (undecodable argv bytes) in a query value or the body.
            raise CliError("an argument is not valid UTF-8 text", 2) from None
        if response.status_code == 404 and self.base_url.endswith(API):
            raise CliError(f"--api-url names the server, without {API}: {self.base_url}", 2)
        if response.status_code >= 400:
            code = 2 if response.status_code in BAD_INPUT else 1
            reason = _reason(response)
            if response.status_code == 404 and reason == "Not Found":
                # No route matched (an id with a slash): name what was asked for.
                reason = (
                    f"not found: {unquote(path)} (no such record; check the id, and that"
                    f" --api-url {self.base_url} is the office server)"
                )
            hint = self._missing_token_hint if response.status_code == 401 else ""
            raise CliError(reason + (f": {hint}" if hint else ""), code)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise CliError(f"the server at {self.base_url} sent a non-JSON answer") from None

    def ids_with_prefix(self, kind: str, prefix: str) -> list[str]:
        """The ids of ``kind`` that start with ``prefix`` (see :mod:`.id_prefix`)."""
        try:
            found = self.get(api_path("ids", kind, prefix))
        except CliError as exc:
            if exc.exit_code != 1:
                raise
            # A server without the lookup, or refusing it: the value goes out as it is (an
            # unreachable server fails the request itself the same way right after).
            return []
        return [str(item) for item in found.get("ids", [])] if isinstance(found, dict) else []

    def get(self, path: str, **params: Any) -> Any:
        """``GET path`` with query ``params`` (``None`` values are left out)."""
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """``POST path`` with a JSON body."""
        return self.request("POST", path, body=body or {})

    def patch(self, path: str, body: Mapping[str, Any]) -> Any:
        """``PATCH path`` with a JSON body."""
        return self.request("PATCH", path, body=body)

    def collect(self, path: str, *, limit: int, **params: Any) -> list[dict[str, Any]]:
        """Follow ``next_cursor`` through a list endpoint until ``limit`` items."""
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        while len(items) < limit:
            page = self.get(path, limit=min(PAGE_SIZE, limit - len(items)), cursor=cursor, **params)
            items += page.get("items", []) if isinstance(page, dict) else []
            cursor = page.get("next_cursor") if isinstance(page, dict) else None
            if not cursor:
                break
        return items[:limit]


@contextmanager
def api(current: CliState | None = None) -> Iterator[ApiClient]:
    """An :class:`ApiClient` for the current command's ``--api-url`` and token."""
    current = current or state()
    source = "OFFICE_TOKEN" if current.token else f"the token in {current.admin_token_path}"
    hint = (
        "no token was sent: set OFFICE_TOKEN (or --token), or point OFFICE_HOME at the "
        f"home of `office serve` (there is no {current.admin_token_path})"
    )
    client = ApiClient(
        current.api_url, current.resolved_token(), token_source=source, missing_token_hint=hint
    )
    try:
        yield client
    finally:
        client.close()


def workspace_id(client: ApiClient, given: str | None) -> str:
    """The workspace to act in: ``given`` or ``OFFICE_WORKSPACE_ID``, else the only one.

    ``given`` is an id (32 hex digits, used as given: a workspace *named* like an id
    is reached by its id) or a name (looked up).

    Raises:
        CliError: a blank ``given`` (exit 2), none given and the server has several
            workspaces or none (exit 2), or no workspace has the name given (exit 1: not
            found, like a missing id).
    """
    if given is not None and not given.strip():
        raise CliError("--workspace needs a workspace id or name", 2)
    if given and _ID.fullmatch(given):
        return given
    if given:
        found = _id_or_name(client.collect("/workspaces", limit=1000), given)
        if found is None:
            raise CliError(f"no workspace {given!r} (give its id or name)", 1)
        return found
    spaces = client.collect("/workspaces", limit=2)
    if len(spaces) == 1:
        return str(spaces[0]["id"])
    if not spaces:
        raise CliError("there is no workspace yet: create one with `office import DIR`", 2)
    raise CliError(
        "there are several workspaces: name one with --workspace (or set OFFICE_WORKSPACE_ID)", 2
    )


def with_agent_names(
    client: ApiClient,
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    *,
    workspace: str | None = None,
) -> list[dict[str, Any]]:
    """Copies of ``rows`` for a table, with the agent ids under ``keys`` shown as names.

    An actor (``agent:<id>``) becomes ``agent:<name>``.

    The agents of each workspace the rows belong to (their ``workspace_id``, else
    ``workspace``) are listed once. An id that cannot be named (a deleted agent, a token
    that may not list agents) is shown as it is. With ``--json`` nothing is looked up:
    JSON output keeps the ids.
    """
    if state().json:
        return [dict(row) for row in rows]
    spaces = {str(row.get("workspace_id") or workspace) for row in rows} - {"None"}
    names: dict[str, str] = {}
    for space in sorted(spaces):
        try:
            agents = client.collect(api_path("workspaces", space, "agents"), limit=1000)
        except CliError:
            continue
        names.update({str(agent["id"]): str(agent["name"]) for agent in agents})

    def named(value: Any) -> Any:
        text = str(value)
        if text.startswith("agent:") and text[6:] in names:
            return f"agent:{names[text[6:]]}"  # an actor
        return names.get(text, value)

    return [{**row, **{key: named(row.get(key)) for key in keys}} for row in rows]


def agent_id(client: ApiClient, workspace: str, value: str) -> str:
    """Resolve an agent given by id or by name within ``workspace``.

    Raises:
        CliError: no agent of the workspace has that id or name (exit 1: not found, like
            any other missing record).
    """
    return _member(client, workspace, "agents", value)


def project_id(client: ApiClient, workspace: str, value: str) -> str:
    """Resolve a project given by id or by name within ``workspace``.

    Raises:
        CliError: no project of the workspace has that id or name (exit 1: not found,
            like any other missing record).
    """
    return _member(client, workspace, "projects", value)


def _id_or_name(records: Sequence[Mapping[str, Any]], value: str) -> str | None:
    """The id of the record whose id or name is ``value`` (``None``: none is)."""
    for record in records:
        if value in (record.get("id"), record.get("name")):
            return str(record["id"])
    return id_prefix.unique_match(list(records), value, "records")


def routine_ref(client: ApiClient, value: str) -> str:
    """The id of the routine ``value`` names: an id (32 hex digits) as given, else a name.

    Names are looked up in every workspace, archived routines last (only when no other
    has the name). Names need not be unique (each coordinator has its own "Coordinator
    heartbeat"), so a name several routines share is refused with their ids and assignees.

    Raises:
        CliError: blank text (exit 2); no routine has the name ("not found"), or several
            have (exit 1).
    """
    if not value.strip():
        raise CliError("the routine must be an id or a name, not blank", 2)
    if _ID.fullmatch(value):
        return value
    expanded = id_prefix.expand("routines", value, client.ids_with_prefix)
    if expanded != value:
        return expanded
    named = [
        (space["id"], routine)
        for space in client.collect("/workspaces", limit=1000)
        for routine in client.collect(api_path("workspaces", space["id"], "routines"), limit=1000)
        if routine.get("name") == value
    ]
    live = [(space, routine) for space, routine in named if routine.get("status") != "archived"]
    named = live or named  # an archived routine is reached by name only when alone
    if not named:
        raise CliError(f"routine {value!r} not found (give its id or name)", 1)
    if len(named) > 1:
        names = {
            agent["id"]: agent["name"]
            for space in {space for space, _ in named}
            for agent in client.collect(api_path("workspaces", space, "agents"), limit=1000)
        }
        choices = ", ".join(
            f"{routine['id']} (assignee {names.get(routine.get('assignee_agent_id'), '-')})"
            for _, routine in named
        )
        raise CliError(f"{len(named)} routines are named {value!r}: give an id: {choices}", 1)
    return str(named[0][1]["id"])


def _member(client: ApiClient, workspace: str, collection: str, value: str) -> str:
    """The id of the agent or project (``collection``) of ``workspace`` with that id or name.

    Raises:
        CliError: none has (exit 1).
    """
    found = _id_or_name(
        client.collect(api_path("workspaces", workspace, collection), limit=1000), value
    )
    if found is None:
        raise CliError(f"no {collection.removesuffix('s')} {value!r} in workspace {workspace}", 1)
    return found
