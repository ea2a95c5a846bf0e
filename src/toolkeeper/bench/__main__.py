"""``python -m toolkeeper.bench``: measure SPEC §10 targets and print figures.

Benchmarks are not tests: a missed target prints FAIL but exits 0 unless ``--strict``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from toolkeeper.bench.model import Sizes
from toolkeeper.bench.report import print_results, write_json
from toolkeeper.bench.runner import BENCHMARKS, run


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m toolkeeper.bench", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="fewer iterations and a 1 s throughput window (CI smoke; rough figures)")
    p.add_argument("--only", action="append", choices=sorted(BENCHMARKS), default=[],
                   metavar="NAME", help=f"run only this benchmark ({', '.join(BENCHMARKS)}); "
                                        "repeatable")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument("--strict", action="store_true", help="exit 1 when any target is missed")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    results = run(args.only, sizes)
    print_results(results)
    if args.json:
        write_json(args.json, results, sizes)
    missed = any(row.passed is False for r in results for row in r.rows)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":  # guarded: spawned workers re-import this module
    sys.exit(main())
