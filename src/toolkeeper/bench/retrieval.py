"""Issue 10: ``retrieval.query`` over 10,000 chunks, governed (``gw.call``) vs the retrieval
service called directly, on the embedded SQLite store (FTS5, bm25). The bench has no
PostgreSQL mode; the same query runs there through ``ts_rank_cd``."""

from __future__ import annotations

import asyncio
import random
import tempfile
import time

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, percentile
from toolkeeper.bench.sampling import BlockFn, notes_for, side_by_side
from toolkeeper.bench.tools import sqlite_url
from toolkeeper.builtins import definition
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import Autonomy
from toolkeeper.model.profile import Activation, Agent, Profile

NAME = "retrieval"
CHUNKS = 10_000
BATCH = 100
AGENT = "bench-reader"
_VOCAB = [f"{a}{b}{c}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ze")
          for b in ("ba", "de", "fi", "go", "hu", "ja", "ki", "lu")
          for c in ("n", "r", "s", "t", "x")]  # 320 words


def bench_retrieval(sizes: Sizes) -> BenchResult:
    """``retrieval.query`` (top_k 5, two-word queries) over 10,000 one-chunk documents."""
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-") as tmp, \
            Gateway.open(sqlite_url(tmp)) as gw:
        pipeline = _corpus(gw)
        queries = _queries()
        measured = asyncio.run(side_by_side(_direct(gw, pipeline, queries),
                                            _governed(gw, queries), gw.flush, sizes))
    rows = []
    d, g = sorted(measured.direct_ns), sorted(measured.governed_ns)
    for q in (50, 95):
        direct, governed = percentile(d, q) / 1000.0, percentile(g, q) / 1000.0
        rows += [Row(metric=f"retrieval_direct_p{q}", value=direct, unit="us"),
                 Row(metric=f"retrieval_governed_p{q}", value=governed, unit="us"),
                 Row(metric=f"retrieval_overhead_p{q}", value=governed - direct, unit="us")]
    notes = notes_for(measured, sizes)
    notes.append(f"{CHUNKS} chunks in one pipeline (SQLite FTS5, bm25); direct = "
                 "RetrievalService.query on the same store; no PostgreSQL mode in this bench")
    return BenchResult(name=NAME, title="retrieval.query over 10,000 chunks (issue 10)",
                       rows=rows, notes=notes)


def _corpus(gw: Gateway) -> str:
    rng = random.Random(10)
    pipeline = gw.retrieval.create("default", "bench", chunk_chars=400, chunk_overlap=0).id
    for start in range(0, CHUNKS, BATCH):
        docs = [{"text": " ".join(rng.choices(_VOCAB, k=20)), "source": f"doc-{i}",
                 "metadata": {"n": i % 10}} for i in range(start, start + BATCH)]
        gw.retrieval.ingest("default", pipeline, docs)
    gw.registry.register(definition("retrieval"))
    gw.registry.put_profile(Profile(name="bench-reader", autonomy=Autonomy.GUARDED, activations=(
        Activation(tool="retrieval", policy={"pipeline_id": pipeline}),)))
    gw.registry.put_agent(Agent(name=AGENT, profile="bench-reader"))
    return pipeline


def _queries() -> list[str]:
    rng = random.Random(11)
    return [" ".join(rng.sample(_VOCAB, 2)) for _ in range(997)]


def _direct(gw: Gateway, pipeline: str, queries: list[str]) -> BlockFn:
    query = gw.retrieval.query

    async def block(first: int, count: int) -> list[int]:
        clock, samples = time.perf_counter_ns, []
        for i in range(first, first + count):
            t0 = clock()
            query("default", pipeline, queries[i % len(queries)], top_k=5)
            samples.append(clock() - t0)
        return samples

    return block


def _governed(gw: Gateway, queries: list[str]) -> BlockFn:
    call = gw.call

    async def block(first: int, count: int) -> list[int]:
        clock, samples, failed = time.perf_counter_ns, [], None
        for i in range(first, first + count):
            t0 = clock()
            res = await call("retrieval", "query", {"query": queries[i % len(queries)],
                                                    "top_k": 5}, agent=AGENT)
            samples.append(clock() - t0)
            if not res.ok or not res.output["chunks"]:
                failed = res
        if failed is not None:
            raise BenchError(f"governed retrieval.query failed: {failed.status} "
                             f"{failed.reason} {failed.message}")
        return samples

    return block
