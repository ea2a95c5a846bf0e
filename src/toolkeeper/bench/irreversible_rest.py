"""Group commit in ``serve`` (issue 32): durable irreversible calls over REST to one server
worker on SQLite, 16 in flight against the same calls made one by one.

On the embedded store a worker runs its calls on its event loop. A call whose claim or
finish has company on that loop waits for the commit off the loop (the group commit's
drainer thread), so the others go on and their writes share the next transaction; a lone
call commits inline. The rows: calls/s one by one and at 16 in flight, their ratio, the
claims and finishes per transaction (``toolkeeper_store_group_commit_writes_total`` over
``toolkeeper_store_group_commits_total`` from the worker's ``/metrics``) in each run, and
the checks: an outcome row per answered call (exactly once: each call has a fresh key)
and an audit chain that verifies.
"""

from __future__ import annotations

import tempfile
import time
import urllib.request

from toolkeeper.bench.irreversible import _verify
from toolkeeper.bench.model import BenchResult, Row, Sizes, Target, ratio_row
from toolkeeper.bench.rest import _free_port, _start, _wait_ready, byte_compiled, load
from toolkeeper.bench.tools import AGENT, open_gateway, sqlite_url

NAME = "irreversible_rest"
IN_FLIGHT = 16
BODY = {"tool": "record", "arguments": {"n": 1}}
"""No idempotency key: each call gets a fresh one (recorded, never deduplicated)."""
SHARED = Target(op=">=", bound=2)
"""At 16 in flight, claims and finishes per transaction: commits are shared."""
NOT_SLOWER = Target(op=">=", bound=1)
"""Calls/s at 16 in flight over one by one: sharing commits must not cost throughput."""
SYSTEM_TENANT = "system"
"""``serve``'s default system tenant: its operator token reads the process's metrics."""


def bench_irreversible_rest(sizes: Sizes) -> BenchResult:
    result = BenchResult(name=NAME, title="Irreversible calls over REST, one serve worker, "
                                          "SQLite: 16 in flight vs one by one (group commit)")
    seconds = max(2.0, sizes.duration_s)
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-gc-") as tmp:
        url = sqlite_url(tmp)
        with open_gateway(url) as gw:
            _, agent = gw.store.tokens.create(tenant_id="default", role="agent", agent=AGENT)
            _, operator = gw.store.tokens.create(tenant_id=SYSTEM_TENANT, role="operator")
        port = _free_port()
        byte_compiled()
        server = _start(url, port, workers=1)
        answered = 0
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_ready(port, time.monotonic())
            runs: dict[int, tuple[float, float]] = {}
            for conns in (1, IN_FLIGHT):
                before = _commits(base, operator)
                doc = load(f"{base}/tools/execute", agent, seconds, body=BODY,
                           connections=conns)
                after = _commits(base, operator)
                answered += sum(doc["statuses"].values())
                runs[conns] = (doc["rate"], _per_commit(before, after))
        finally:
            server.terminate()
            server.wait(timeout=30)
        result.rows += _rows(runs)
        result.rows += _verify(NAME, url, answered)
    result.notes.append(
        f"one worker (uvloop), the load generator in its own process on the same cores, "
        f"closed loops of {seconds:g} s on 1 then {IN_FLIGHT} keep-alive connections, each "
        "call a fresh key; writes per commit from the worker's /metrics")
    return result


def _rows(runs: dict[int, tuple[float, float]]) -> list[Row]:
    (one, one_shared), (many, many_shared) = runs[1], runs[IN_FLIGHT]
    return [
        Row(metric=f"{NAME}_calls_per_s_one_by_one", value=one, unit="calls/s", decimals=0),
        Row(metric=f"{NAME}_calls_per_s_{IN_FLIGHT}_in_flight", value=many, unit="calls/s",
            decimals=0),
        ratio_row(f"{NAME}_{IN_FLIGHT}_in_flight_vs_one_by_one", many, one, NOT_SLOWER),
        Row(metric=f"{NAME}_writes_per_commit_one_by_one", value=one_shared, unit="writes",
            decimals=2),
        Row(metric=f"{NAME}_writes_per_commit_{IN_FLIGHT}_in_flight", value=many_shared,
            unit="writes", target=SHARED, decimals=2),
    ]


def _commits(base: str, token: str) -> tuple[float, float]:
    """The worker's ``(transactions, writes)`` of its group commit so far."""
    req = urllib.request.Request(f"{base}/metrics",
                                 headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("toolkeeper_store_group_commits_total",
                    "toolkeeper_store_group_commit_writes_total"):
            found[name] = float(value)
    return (found["toolkeeper_store_group_commits_total"],
            found["toolkeeper_store_group_commit_writes_total"])


def _per_commit(before: tuple[float, float], after: tuple[float, float]) -> float:
    txns, writes = after[0] - before[0], after[1] - before[1]
    return writes / txns if txns else 0.0
