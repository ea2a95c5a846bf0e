"""Benchmarks of SPEC §10, side by side in one run: ``python -m toolkeeper.bench``.

``BENCHMARKS`` and ``run`` load on first use, so the server process the REST benchmark
starts (``toolkeeper.bench.rest_app``) imports no more than a real server does.
"""

from typing import Any

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, Target

__all__ = ["BENCHMARKS", "BenchError", "BenchResult", "Row", "Sizes", "Target", "run"]


def __getattr__(name: str) -> Any:
    if name in ("BENCHMARKS", "run"):
        from toolkeeper.bench import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'toolkeeper.bench' has no attribute {name!r}")
