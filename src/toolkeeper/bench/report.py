"""Printing results: a rich table per benchmark, then plain, parseable summary lines."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from toolkeeper.bench.model import BenchResult, Sizes

NOISE_NOTE = ("note: figures are noisy on shared machines (other processes, CPU frequency, "
              "disk); compare runs on the same machine, side by side.")


def machine() -> dict[str, Any]:
    return {"cpu_count": os.cpu_count(), "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(terse=True), "executable": sys.executable}


def machine_line(info: dict[str, Any]) -> str:
    return (f"machine: cpu_count={info['cpu_count']} python={info['python']} "
            f"({info['implementation']}) platform={info['platform']}")


def table(result: BenchResult) -> Table:
    t = Table(title=result.title, title_justify="left")
    for name, justify in (("metric", "left"), ("value", "right"), ("unit", "left"),
                          ("target", "left"), ("result", "left")):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in result.rows:
        verdict = {None: "", True: "[green]PASS[/]", False: "[red]FAIL[/]"}[row.passed]
        t.add_row(row.metric, row.shown, row.unit, str(row.target or ""), verdict)
    return t


def print_results(results: Sequence[BenchResult], console: Console | None = None) -> None:
    """Tables and notes through rich; the summary with plain ``print`` (no wrapping)."""
    console = console or Console()
    info = machine()
    console.print(machine_line(info), markup=False, highlight=False, soft_wrap=True)
    console.print(NOISE_NOTE, markup=False, highlight=False, soft_wrap=True)
    for result in results:
        console.print()
        console.print(table(result))
        for note in result.notes:
            console.print(f"  {note}", markup=False, highlight=False, soft_wrap=True)
    print()
    print("summary:")
    for line in summary_lines(results):
        print(line)
    sys.stdout.flush()


def summary_lines(results: Sequence[BenchResult]) -> list[str]:
    return [line for result in results for line in result.summary_lines()]


def write_json(path: str, results: Sequence[BenchResult], sizes: Sizes) -> None:
    doc = {"machine": machine(), "sizes": sizes.to_dict(), "note": NOISE_NOTE,
           "benchmarks": [r.to_dict() for r in results], "summary": summary_lines(results)}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
