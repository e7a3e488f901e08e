"""``office token …``: create, list and revoke API tokens (needs an admin token).

A new token's secret is printed once; the server keeps only its hash and never shows it
again. Rotating the admin token: create a new one, switch clients to it, revoke the old.
"""

from __future__ import annotations

import click

from office_scheduler.cli.client import api, api_path, checked_text
from office_scheduler.cli.state import details, emit, json_option, table
from office_scheduler.domain.status import TokenKind

TOKEN_COLUMNS = [
    ("id", "id"),
    ("kind", "kind"),
    ("name", "name"),
    ("active", "active"),
    ("created", "created_at"),
    ("expires", "expires_at"),
    ("revoked", "revoked_at"),
    ("run", "run_id"),
]
TOKEN_FIELDS = ["id", "kind", "name", "active", "created_at", "expires_at", "revoked_at"]


@click.group("token")
def token_group() -> None:
    """Create, list and revoke API tokens."""


@token_group.command("create")
@click.option(
    "--name", required=True, callback=checked_text, help="A label for people (who or what uses it)."
)
@json_option
def token_create(name: str) -> None:
    """Create an admin token and print its secret (shown this once)."""
    with api() as client:
        token = client.post("/tokens", {"name": name})

    def render() -> None:
        click.echo(details(token, TOKEN_FIELDS))
        click.echo(f"secret (shown once; store it now): {token['secret']}")

    emit(token, render)


@token_group.command("list")
@click.option("--kind", type=click.Choice([k.value for k in TokenKind]), help="Only this kind.")
@click.option("--all", "show_all", is_flag=True, help="Include revoked and expired tokens.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@json_option
def token_list(kind: str | None, show_all: bool, limit: int) -> None:
    """List tokens, newest first (never their secrets)."""
    with api() as client:
        active = None if show_all else True
        items = client.collect("/tokens", limit=limit, kind=kind, active=active)
    emit(items, lambda: click.echo(table(items, TOKEN_COLUMNS)))


@token_group.command("revoke")
@click.argument("token_id", callback=checked_text)
@json_option
def token_revoke(token_id: str) -> None:
    """Revoke TOKEN_ID at once (again is fine)."""
    with api() as client:
        token = client.post(api_path("tokens", token_id, "revoke"))
    emit(token, lambda: click.echo(details(token, TOKEN_FIELDS)))
