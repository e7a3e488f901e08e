"""Dashboard sign-in: the cookie is a server-side session (never the admin token), it ends
on sign-out, on expiry and when its token is revoked; failed sign-ins are slowed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from api_harness import Api, open_api
from office_scheduler.auth import SESSION_TTL
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import dashboard_sessions


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        harness.workspace()  # the pages need one
        yield harness


def _origin() -> dict[str, str]:
    return {"origin": "http://testserver"}


def sign_in(api: Api, token: str, *, source: str = "testclient") -> Any:
    api.client.cookies.clear()
    transport = cast(Any, api.client)._transport
    transport.client = (source, 40000)
    try:
        return api.client.post(
            "/login",
            data={"token": token, "next": "/runs"},
            headers=_origin(),
            follow_redirects=False,
        )
    finally:
        transport.client = ("testclient", 50000)


def with_cookie(api: Api, session: str) -> None:
    api.client.cookies.clear()
    api.client.cookies.set("office_session", session)


def page(api: Api, session: str) -> int:
    with_cookie(api, session)
    response = api.client.get("/runs", follow_redirects=False)
    return response.status_code


def test_the_cookie_is_a_random_session_not_the_token(api: Api) -> None:
    first = sign_in(api, api.admin_token)
    assert first.status_code == 303
    session = first.cookies["office_session"]
    assert api.admin_token not in session
    assert sign_in(api, api.admin_token).cookies["office_session"] != session, "random"
    assert page(api, session) == 200
    assert page(api, api.admin_token) == 303, "the raw token is no session"
    with api.service.store.db.read() as conn:
        stored = [row.session_hash for row in conn.execute(dashboard_sessions.select())]
    assert len(stored) == 2
    assert session not in stored, "only the session id's hash is stored"
    cookie = first.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie


def test_sign_out_ends_the_session_on_the_server(api: Api) -> None:
    session = sign_in(api, api.admin_token).cookies["office_session"]
    other = sign_in(api, api.admin_token).cookies["office_session"]
    with_cookie(api, session)
    out = api.client.post("/logout", headers=_origin(), follow_redirects=False)
    assert out.status_code == 303
    assert page(api, session) == 303, "a copied cookie no longer works"
    assert page(api, other) == 200, "only that session ended"


def test_a_session_expires(api: Api) -> None:
    session = sign_in(api, api.admin_token).cookies["office_session"]
    api.clock.advance(SESSION_TTL - timedelta(seconds=1))
    assert page(api, session) == 200
    api.clock.advance(timedelta(seconds=2))
    assert page(api, session) == 303


def test_revoking_the_token_ends_its_sessions(api: Api) -> None:
    spare = api.ok("POST", "/api/v1/tokens", status=201, json={"name": "spare"})
    session = sign_in(api, spare["secret"]).cookies["office_session"]
    mine = sign_in(api, api.admin_token).cookies["office_session"]
    assert page(api, session) == 200
    api.ok("POST", f"/api/v1/tokens/{spare['id']}/revoke")
    assert page(api, session) == 303
    assert page(api, mine) == 200


def test_repeated_failures_from_one_address_are_slowed(api: Api) -> None:
    guesser, person = "203.0.113.9", "198.51.100.7"
    failures = [sign_in(api, f"osa_guess{n}", source=guesser).status_code for n in range(5)]
    assert failures == [401] * 5
    slowed = sign_in(api, "osa_guess", source=guesser)
    assert slowed.status_code == 429
    assert int(slowed.headers["Retry-After"]) >= 1
    assert "too many failed sign-ins" in slowed.text
    assert sign_in(api, api.admin_token, source=guesser).status_code == 429, "token unchecked"
    assert sign_in(api, api.admin_token, source=person).status_code == 303, "others sign in"
    api.clock.advance(timedelta(seconds=31))
    assert sign_in(api, api.admin_token, source=guesser).status_code == 303
