"""The HTTP client of the client commands (``office task …``, ``office runs …``).

Server errors become :class:`CliError`: bad input (400, 422) exits 2, every other failure
(401, 403, 404, 409, 5xx, an unreachable server) exits 1, each with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from office_scheduler.cli.state import CliError, CliState, state

API = "/api/v1"
PAGE_SIZE = 100
BAD_INPUT = frozenset({400, 422})


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
    """

    def __init__(self, base_url: str, token: str | None, *, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
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
        try:
            response = self._http.request(method, API + path, params=query, json=body)
        except httpx.ConnectError:
            raise CliError(f"cannot reach the office server at {self.base_url}") from None
        except httpx.TimeoutException:
            raise CliError(f"the office server at {self.base_url} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise CliError(f"request to {self.base_url} failed: {exc}") from None
        if response.status_code >= 400:
            code = 2 if response.status_code in BAD_INPUT else 1
            raise CliError(_reason(response), code)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise CliError(f"the server at {self.base_url} sent a non-JSON answer") from None

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
    client = ApiClient(current.api_url, current.resolved_token())
    try:
        yield client
    finally:
        client.close()


def workspace_id(client: ApiClient, given: str | None) -> str:
    """The workspace to act in: ``given`` (or ``OFFICE_WORKSPACE_ID``), else the only one.

    Raises:
        CliError: none given and the server has several workspaces or none (exit 2).
    """
    if given:
        return given
    spaces = client.collect("/workspaces", limit=2)
    if len(spaces) == 1:
        return str(spaces[0]["id"])
    hint = "there is no workspace yet" if not spaces else "there are several workspaces"
    raise CliError(f"{hint}: name one with --workspace (or set OFFICE_WORKSPACE_ID)", 2)


def agent_id(client: ApiClient, workspace: str, value: str) -> str:
    """Resolve an agent given by id or by name within ``workspace``.

    Raises:
        CliError: no agent of the workspace has that id or name (exit 1: not found, like
            any other missing record).
    """
    agents = client.collect(f"/workspaces/{workspace}/agents", limit=1000)
    for agent in agents:
        if value in (agent.get("id"), agent.get("name")):
            return str(agent["id"])
    raise CliError(f"no agent {value!r} in workspace {workspace}", 1)
