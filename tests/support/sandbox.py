"""The OS sandbox the ``shell``, ``git`` and artifact tests need (``toolkeeper.sandbox``):
without bubblewrap they skip with a loud reason locally and fail under ``CI=true``."""

from __future__ import annotations

import pytest

from tests.support.required import missing
from toolkeeper.sandbox import BWRAP, probe


@pytest.fixture
def needs_sandbox() -> None:
    why = probe(BWRAP)
    if why is not None:
        missing(f"NO SANDBOX HERE (bubblewrap), these tests NOT RUN: {why}")
