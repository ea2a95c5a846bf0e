"""``toolkeeper demo``: a scripted agent walks through every gate; exit 0 only if every
outcome was the one the spec promises (it doubles as a smoke test)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from toolkeeper.cli._common import EXIT_OK, EXIT_REFUSED, out, refusals


def demo(
    db_url: Annotated[str | None, typer.Option(
        "--db", help="Run on this database instead of a throwaway SQLite file.")] = None,
) -> None:
    """Run the guided demo: allow, preview, confirm, approve, deny, dedupe, compensate."""
    from toolkeeper.demo.runner import run_demo

    console = out()
    with refusals():
        if db_url is not None:
            ok = run_demo(db_url, console)
        else:
            with tempfile.TemporaryDirectory(prefix="toolkeeper-demo-") as tmp:
                ok = run_demo(f"sqlite:///{Path(tmp) / 'demo.db'}", console)
    raise typer.Exit(EXIT_OK if ok else EXIT_REFUSED)
