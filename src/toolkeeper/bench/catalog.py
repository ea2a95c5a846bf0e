"""SPEC §10 catalog scale: 10,000 tools and 1,000 profiles in the store; a real server's
start-up time and RSS, and one agent's ``GET /discovery/agents/{id}/enabled`` p50."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from typing import Any

import httpx
from sqlalchemy import insert

from toolkeeper.bench.floors import startup_rows
from toolkeeper.bench.model import BenchResult, Row, Sizes, Target
from toolkeeper.bench.rest import _free_port, _rss_mb, _start, _wait_ready, byte_compiled
from toolkeeper.bench.tools import sqlite_url
from toolkeeper.builtins import definition
from toolkeeper.model.enums import Autonomy, ToolStatus
from toolkeeper.model.profile import Activation, Agent, Profile
from toolkeeper.store import Store
from toolkeeper.store.db import utcnow
from toolkeeper.store.registry import definition_hash
from toolkeeper.store.schema import agents, profiles, tool_versions, tools

NAME = "catalog"
TOOLS, PROFILES, PER_PROFILE = 10_000, 1_000, 20
LIST_P50_MS = Target(op="<=", bound=5)
RSS_MB = Target(op="<=", bound=300)


def bench_catalog(sizes: Sizes) -> BenchResult:
    result = BenchResult(name=NAME, title=f"{TOOLS:,} tools, {PROFILES:,} profiles (SPEC 10.5)")
    with tempfile.TemporaryDirectory(prefix="toolkeeper-catalog-") as tmp:
        url = sqlite_url(tmp)
        token = _fill(url)
        port = _free_port()
        byte_compiled()
        started = time.monotonic()
        server = _start(url, port)
        try:
            startup = _wait_ready(port, started, timeout_s=120)
            samples = _enabled_latencies(port, token, max(50, sizes.block_calls))
            rss = _rss_mb(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=15)
    samples.sort()
    result.rows += [
        Row(metric="catalog_enabled_p50", value=statistics.median(samples), unit="ms",
            target=LIST_P50_MS, decimals=2),
        Row(metric="catalog_enabled_p99", value=samples[int(len(samples) * 0.99) - 1],
            unit="ms", decimals=2),
        *startup_rows("catalog", startup),
        Row(metric="catalog_rss", value=rss, unit="MB", target=RSS_MB, decimals=0),
    ]
    result.notes.append(f"{len(samples)} sequential GETs over one keep-alive connection, "
                        f"agent with {PER_PROFILE} activations; start-up = process start to "
                        "/healthz, catalog loaded from the store")
    return result


def _fill(url: str) -> str:
    """Bulk-load the catalog in one transaction; returns the agent's token."""
    store = Store.open(url)
    try:
        base = definition("calculate", tenant_id="default", is_system=False,
                          builtin_key="calculate", status=ToolStatus.PUBLISHED)
        now = utcnow()
        tool_rows: list[dict[str, Any]] = []
        version_rows: list[dict[str, Any]] = []
        for i in range(TOOLS):
            tool = base.model_copy(update={"name": f"t{i:05d}", "published_at": now})
            tool_id = str(uuid.uuid4())
            doc = tool.model_dump(mode="json")
            tool_rows.append(dict(id=tool_id, tenant_key="default", name=tool.name,
                                  version=tool.version, status="published", is_active=True,
                                  definition=doc, definition_hash=definition_hash(tool),
                                  published_at=now, created_at=now, updated_at=now))
            version_rows.append(dict(id=str(uuid.uuid4()), tool_id=tool_id,
                                     version=tool.version, snapshot=doc,
                                     definition_hash=definition_hash(tool), created_at=now))
        profile_rows = [dict(tenant_id="default", name=f"p{j}", updated_at=now,
                             definition=_profile(j).model_dump(mode="json"))
                        for j in range(PROFILES)]
        agent = Agent(name="bench-agent", profile="p7")
        with store.db.write() as conn:
            conn.execute(insert(tools), tool_rows)
            conn.execute(insert(tool_versions), version_rows)
            conn.execute(insert(profiles), profile_rows)
            conn.execute(insert(agents).values(tenant_id="default", name=agent.name,
                                               profile=agent.profile, updated_at=now,
                                               definition=agent.model_dump(mode="json")))
        return store.tokens.create(tenant_id="default", role="agent", agent=agent.name)[1]
    finally:
        store.close()


def _profile(j: int) -> Profile:
    return Profile(name=f"p{j}", autonomy=Autonomy.GUARDED, activations=tuple(
        Activation(tool=f"t{(j * 10 + k) % TOOLS:05d}") for k in range(PER_PROFILE)))


def _enabled_latencies(port: int, token: str, count: int) -> list[float]:
    url = f"http://127.0.0.1:{port}/discovery/agents/bench-agent/enabled"
    out: list[float] = []
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        first = client.get(url)
        first.raise_for_status()
        assert len(first.json()["tools"]) == PER_PROFILE, first.text[:300]
        for _ in range(count):
            t = time.perf_counter()
            client.get(url).raise_for_status()
            out.append((time.perf_counter() - t) * 1000)
    return out
