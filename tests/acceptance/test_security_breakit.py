"""Regressions found by a hostile review of the security work (issue 7): each test failed
before its fix."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from api_harness import Api, error_of, open_api
from cli_harness import CLEAN_ENV, serving_in_thread
from office_scheduler.api.limits import json_depth
from office_scheduler.cli import office


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as harness:
        yield harness


def test_unterminated_strings_do_not_make_the_depth_check_quadratic(api: Api) -> None:
    # '"\"\"\"…' never closes its string: the old string pattern rescanned the rest of the
    # body from every quote, so 40 KB held the event loop for seconds (1 MiB for hours),
    # before authentication.
    hostile = b'"\\' * 20_000
    started = time.perf_counter()
    assert json_depth(hostile) == 0
    assert time.perf_counter() - started < 1.0, "one pass over the body"
    started = time.perf_counter()
    assert json_depth(b'"\\' * 5 + b"[[[") == 0, "an unterminated string runs to the end"
    assert json_depth(b'["a\\"[", [{}], "\\\\"]') == 3, "escaped quotes end no string"
    response = api.client.post(
        "/api/v1/workspaces",
        content=hostile,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api.admin_token}"},
    )
    elapsed = time.perf_counter() - started
    assert (response.status_code, error_of(response)["field"]) == (422, "body")
    assert elapsed < 1.0, f"{elapsed:.1f} s for a 40 KB body"


def _office(url: str, home: Path, token: str, *args: str) -> Result:
    env: dict[str, str | None] = dict(CLEAN_ENV)
    env |= {"OFFICE_HOME": str(home), "OFFICE_TOKEN": token}
    return CliRunner().invoke(office, ["--api-url", url, *args], env=env)


def test_office_token_arguments_cannot_reach_another_route(api: Api, tmp_path: Path) -> None:
    ws = api.workspace()["id"]
    agent = api.agent(ws)["id"]
    with serving_in_thread(api.client.app) as url:
        # The id was pasted into the URL as is: '../agents/ID/pause?' became
        # POST /api/v1/agents/ID/pause (query '/revoke') and paused the agent.
        hijack = _office(
            url, tmp_path, api.admin_token, "token", "revoke", f"../agents/{agent}/pause?"
        )
        assert hijack.exit_code == 1, hijack.stdout
        assert "not found" in hijack.stderr.lower()
        assert api.ok("GET", f"/api/v1/agents/{agent}")["status"] == "idle"
        for bad in ("", "a\x00b", "\udcff"):
            refused = _office(url, tmp_path, api.admin_token, "token", "revoke", bad)
            assert refused.exit_code == 2, (bad, refused.stderr)
            assert refused.stderr.startswith("office: Invalid value for 'TOKEN_ID'")
            assert refused.stderr.count("\n") == 1
        unencodable = _office(url, tmp_path, api.admin_token, "token", "create", "--name", "\udcff")
        assert unencodable.exit_code == 2, unencodable.stderr
        assert "--name" in unencodable.stderr
        assert "unexpected error" not in unencodable.stderr
