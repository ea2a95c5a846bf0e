"""Config tests: a fresh gateway (the sample tools are ``tests.support.config_tools``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolkeeper.gateway import Gateway


@pytest.fixture
def gw(db_url: str) -> Iterator[Gateway]:
    """A gateway on a fresh store (SQLite and PostgreSQL, via the suite's ``db_url``)."""
    with Gateway.open(db_url) as gateway:
        yield gateway
