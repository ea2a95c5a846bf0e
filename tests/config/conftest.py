"""Config tests: ``config_sample_tools`` importable by module name, and a fresh gateway."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeeper.gateway import Gateway

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # also under --import-mode=importlib
    sys.path.insert(0, str(HERE))


@pytest.fixture
def gw(db_url: str) -> Iterator[Gateway]:
    """A gateway on a fresh store (SQLite and PostgreSQL, via the suite's ``db_url``)."""
    with Gateway.open(db_url) as gateway:
        yield gateway
