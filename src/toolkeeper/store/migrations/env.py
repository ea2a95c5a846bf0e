"""Alembic environment: runs migrations for the URL handed over by toolkeeper."""

from __future__ import annotations

from alembic import context

from toolkeeper.store.db import single_connection_engine
from toolkeeper.store.schema import metadata
from toolkeeper.store.stats import call_stats  # noqa: F401  (its table is on metadata)

config = context.config
url = config.attributes.get("toolkeeper_url") or config.get_main_option("sqlalchemy.url")
engine = single_connection_engine(str(url))
try:
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=metadata,
                          render_as_batch=connection.dialect.name == "sqlite")
        with context.begin_transaction():
            context.run_migrations()
finally:
    engine.dispose()
