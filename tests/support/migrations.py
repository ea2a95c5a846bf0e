"""What a migration left in a database (the up-and-down tests of tests/store)."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect


def table_names(url: str) -> set[str]:
    """The tables of the database at ``url`` now."""
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
