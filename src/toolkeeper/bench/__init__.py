"""Benchmarks of SPEC §10, side by side in one run: ``python -m toolkeeper.bench``."""

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, Target
from toolkeeper.bench.runner import BENCHMARKS, run

__all__ = ["BENCHMARKS", "BenchError", "BenchResult", "Row", "Sizes", "Target", "run"]
