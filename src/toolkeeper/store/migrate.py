"""Alembic, driven from code: ``toolkeeper db upgrade`` and ``Store.open`` call ``upgrade``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["toolkeeper_url"] = url
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (idempotent)."""
    command.upgrade(alembic_config(url), revision)


def head() -> str:
    """The newest revision this package ships (what ``upgrade`` brings a database to)."""
    from alembic.script import ScriptDirectory

    rev = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert rev is not None
    return rev


def current(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    from toolkeeper.store.db import single_connection_engine

    engine = single_connection_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
