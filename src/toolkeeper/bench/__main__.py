"""``python -m toolkeeper.bench``: measure SPEC §10 targets and print figures.

Benchmarks are not tests: a missed target prints FAIL but exits 0 unless ``--strict``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from toolkeeper.bench.model import Sizes
from toolkeeper.bench.procs import PROFILE_DIR
from toolkeeper.bench.report import print_results, write_json
from toolkeeper.bench.runner import BENCHMARKS, run


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m toolkeeper.bench", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="fewer iterations and a 1 s throughput window (CI smoke; rough figures)")
    p.add_argument("--only", action="append", choices=sorted(BENCHMARKS), default=[],
                   metavar="NAME", help=f"run only this benchmark ({', '.join(BENCHMARKS)}); "
                                        "repeatable")
    p.add_argument("--json", metavar="PATH",
                   help="write the results as JSON to PATH (default: .bench/bench-<UTC time>."
                        "json, for comparing runs)")
    p.add_argument("--no-json", action="store_true", help="write no JSON file")
    p.add_argument("--profile", action="store_true",
                   help="also profile each benchmark: the bench process with cProfile "
                        "(.bench/profile-<UTC time>/<name>.pstats and <name>.txt) and every "
                        "server it starts with py-spy (<program>-<port>.svg flame graphs); "
                        "figures measured while profiling are not comparable")
    p.add_argument("--strict", action="store_true", help="exit 1 when any target is missed")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    profile_dir = Path(".bench") / f"profile-{stamp}" if args.profile else None
    if profile_dir is not None:  # read by bench.procs.serving in this process
        os.environ[PROFILE_DIR] = str(profile_dir.absolute())
    results = run(args.only, sizes, profile_dir=profile_dir)
    print_results(results)
    if not args.no_json:
        path = Path(args.json or Path(".bench") / f"bench-{stamp}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(str(path), results, sizes)
        print(f"results: {path}", file=sys.stderr)  # stdout ends with the summary
    if profile_dir is not None:
        print(f"profiles: {profile_dir}/<name>.pstats (python -m pstats) and <name>.txt; "
              "servers: <program>-<port>.svg (py-spy flame graphs)", file=sys.stderr)
    missed = any(row.passed is False for r in results for row in r.rows)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":  # guarded: spawned workers re-import this module
    sys.exit(main())
