"""``toolkeeper db upgrade``: bring the store's schema to the latest migration."""

from __future__ import annotations

import typer

from toolkeeper.cli._common import EXIT_USAGE, JsonFlag, fail, out, print_json, safe_url, state
from toolkeeper.model.reasons import Reason
from toolkeeper.store import migrate

app = typer.Typer(help="Manage the database schema.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """Run the Alembic migrations up to the newest revision (idempotent)."""
    url = state(ctx).db
    try:
        migrate.upgrade(url)
        revision = migrate.current(url)
    except Exception as exc:  # a bad URL or unreachable server: a usage error, not a crash
        fail(Reason.CONFIG_INVALID, f"cannot upgrade {safe_url(url)}: {exc}", EXIT_USAGE)
    if json_out:
        print_json({"database": safe_url(url), "revision": revision})
    else:
        out().print(f"database at revision {revision}", highlight=False)
