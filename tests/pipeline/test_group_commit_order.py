"""Recorded calls from many threads share group-commit batches (SPEC §10), yet each call's
own events keep their order in its tenant's chain (claim events before finish events) and
the chain verifies, on SQLite and PostgreSQL."""

from __future__ import annotations

import concurrent.futures as cf

from tests.pipeline.gw_helpers import build_gateway
from tests.pipeline.sample_tools import LEDGER, charge

THREADS = 16
CALLS_PER_THREAD = 5
ORDER = ("call.attempted", "call.succeeded", "side_effect.recorded")


def test_concurrent_recorded_calls_keep_each_calls_events_in_order(db_url: str) -> None:
    gw = build_gateway(db_url, tools=[charge])
    try:
        def calls(t: int) -> list[str]:
            out = []
            for i in range(CALLS_PER_THREAD):
                res = gw.call_sync("charge", arguments={"invoice": f"i{t}-{i}", "amount": 1},
                                   agent="bot", idempotency_key=f"k{t}-{i}")
                assert res.ok and not res.deduped, res
                out.append(res.call_id)
            return out

        with cf.ThreadPoolExecutor(THREADS) as pool:
            call_ids = [c for f in [pool.submit(calls, t) for t in range(THREADS)]
                        for c in f.result(timeout=120)]
        gw.flush()
        assert LEDGER["runs"] == THREADS * CALLS_PER_THREAD
        events = gw.store.audit.list("default", limit=10_000)
        seqs = [e.seq for e in events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        for call_id in call_ids:
            kinds = [e.type for e in events if e.call_id == call_id and e.type in ORDER]
            assert kinds == list(ORDER), (call_id, kinds)
        assert gw.store.audit.verify("default").ok
        # fewer transactions than two per call: callers shared batches (a loose bound,
        # never a timing: 16 threads whose tools sleep 10 ms always overlap somewhere)
        assert gw.store.outcomes.group.transactions < 2 * len(call_ids)
    finally:
        gw.close()
