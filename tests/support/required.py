"""What a suite needs from the machine (a browser, a pinned npm package, a peer venv): missing,
the test skips with a loud reason locally and fails under ``CI=true``, so CI never goes green
without having run it."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(message: str) -> NoReturn:
    """Skip (locally) or fail (``CI=true`` or ``CI=1``) with ``message``."""
    if os.environ.get("CI") in ("true", "1"):
        pytest.fail(message)
    pytest.skip(message)
