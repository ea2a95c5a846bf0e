"""Alembic, driven from code: ``toolkeeper db upgrade`` and ``Store.open`` call ``upgrade``.

Alembic loads only when there is something to do: ``Store.open`` first reads the stored
revision (one query) and skips the migration machinery (~0.1 s of imports and script
loading at every start) when the database is already at the newest revision.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


@functools.cache
def head() -> str:
    """The newest revision: each migration file is named after its revision, in order
    (``0007_recent_calls.py``); a test holds this to alembic's head."""
    return max(p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py"))


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["toolkeeper_url"] = url
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (idempotent)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def ensure_head(url: str) -> None:
    """Bring the database at ``url`` to the latest schema; without alembic when it is
    there already."""
    if _stored_revisions(url) != [head()]:
        upgrade(url)


def _stored_revisions(url: str) -> list[str] | None:
    """The revisions alembic recorded, ``None`` without its table (a new database)."""
    from toolkeeper.store.db import single_connection_engine

    engine = single_connection_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except DBAPIError:
        return None
    finally:
        engine.dispose()
    return [str(r[0]) for r in rows]


def current(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    from toolkeeper.store.db import single_connection_engine

    engine = single_connection_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
