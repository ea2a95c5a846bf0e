"""Fixtures of the adapter tests: ``remote``, one real ``toolkeeper serve`` per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.remote_support import Remote, running


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    with running(tmp_path_factory.mktemp("adapters-serve")) as server:
        yield server
