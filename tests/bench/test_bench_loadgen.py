"""The REST benchmark's in-repo load generator: it starts, counts answers, and stops on time
(against the smallest ASGI app, in a real uvicorn). No timing is asserted."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from toolkeeper.bench.loadgen import build_request, run_load
from toolkeeper.bench.procs import listening


@pytest.fixture(scope="module")
def trivial() -> Iterator[str]:
    cmd = [sys.executable, "-m", "uvicorn", "toolkeeper.bench.loadgen:trivial", "--port",
           "{port}", "--no-access-log", "--log-level", "warning"]
    with listening(cmd) as base:
        yield base


def test_closed_loop_counts_every_answer(trivial: str) -> None:
    load = asyncio.run(run_load(f"{trivial}/", connections=4, seconds=0.5))
    assert load.requests > 0
    assert load.errors == 0
    assert load.statuses == {"200": load.requests}
    assert len(load.latencies_ms) == load.requests
    assert load.rate > 0


def test_fixed_rate_sends_no_more_than_its_schedule(trivial: str) -> None:
    load = asyncio.run(run_load(f"{trivial}/", connections=2, seconds=0.5, rate=40))
    # 40/s for 0.5 s: at most 20 scheduled sends (the schedule, not the machine's speed)
    assert 0 < load.requests <= 20
    assert load.statuses == {"200": load.requests}


def test_the_command_prints_its_report_as_json(trivial: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolkeeper.bench.loadgen", f"{trivial}/", "-c", "2", "-d",
         "0.3", "-m", "POST", "--body", "{}", "-H", "Content-Type: application/json"],
        capture_output=True, text=True, timeout=60, check=True)
    doc = json.loads(out.stdout)
    assert doc["requests"] == doc["statuses"]["200"] > 0
    assert doc["errors"] == 0


def test_requests_are_keep_alive_http11_with_their_length() -> None:
    host, port, raw = build_request("http://127.0.0.1:8123/tools/execute?x=1", "POST", b"{}",
                                    {"Authorization": "Bearer t"})
    assert (host, port) == ("127.0.0.1", 8123)
    assert raw.startswith(b"POST /tools/execute?x=1 HTTP/1.1\r\n")
    assert b"Content-Length: 2\r\n" in raw and b"Authorization: Bearer t\r\n" in raw
    assert raw.endswith(b"\r\n\r\n{}")
    with pytest.raises(ValueError, match="plain http"):
        build_request("https://example.test/")


@pytest.mark.slow
def test_the_rest_bench_measures_without_outside_tools() -> None:
    from toolkeeper.bench.model import Sizes
    from toolkeeper.bench.rest import bench_rest

    result = bench_rest(Sizes(warmup=5, blocks=2, block_calls=10, duration_s=0.2, workers=1,
                              budget_s=30.0))
    rows = {row.metric: row for row in result.rows}
    assert rows["rest_execute_rps"].value > 0
    assert rows["rest_loadgen_ceiling_rps"].value > 0  # the generator against a trivial app
    assert rows["rest_execute_p99_at_spec_load"].passed is not None  # SPEC's load: a target
    assert rows["rest_execute_p99_at_half_rate"].value > 0
    assert not any("NOT MEASURED" in note for note in result.notes)
