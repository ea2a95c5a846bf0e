"""Helpers shared by the CLI tests (fixtures live in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import Result

import toolkeeper.demo

DEMO_YAML = Path(toolkeeper.demo.__file__).with_name("demo.yaml")

Invoke = Callable[..., Result]


def as_json(result: Result) -> Any:
    """stdout of a ``--json`` command, parsed (the whole of stdout must be JSON)."""
    assert result.exit_code in (0, 1, 3), result.output
    return json.loads(result.stdout)


def new_token(cli: Invoke, admin: str, role: str, agent: str | None = None) -> str:
    """Create a token through the CLI and return its plaintext."""
    extra = ["--agent", agent] if agent else []
    res = cli("tokens", "create", "--role", role, *extra, "--token", admin, "--json")
    assert res.exit_code == 0, res.output
    token = as_json(res)["token"]
    assert isinstance(token, str)
    return token
