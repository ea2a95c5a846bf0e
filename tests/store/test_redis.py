"""Optional Redis (SPEC §12): rate limits counted across gateways, changes announced."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.support.redisserver import RedisServer, RedisUnavailable
from tests.support.required import missing
from tests.support.waiting import wait_until
from toolkeeper import (
    Activation,
    Agent,
    Autonomy,
    Gateway,
    Limits,
    Profile,
    RateLimit,
    Reason,
    Risk,
    SideEffect,
    tool,
)
from toolkeeper.store import Store
from toolkeeper.store.redis import RedisCounters


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def pong(n: int) -> int:
    """Echo n."""
    return n


def test_counters_are_shared_and_windowed(redis_url: str) -> None:
    a, b = RedisCounters(redis_url, prefix="t1"), RedisCounters(redis_url, prefix="t1")
    hits = [c.hit("k", limit=4, window_s=60) for c in (a, b, a, b, a, b)]
    assert hits[:4] == [None] * 4 and all(h is not None and h <= 60 for h in hits[4:])
    a.close()
    b.close()


def test_unreachable_redis_raises_connection_error_for_the_limiter_to_fall_back() -> None:
    dead = RedisCounters("redis://127.0.0.1:1/0", timeout_s=0.2)
    with pytest.raises(ConnectionError, match="redis unreachable"):
        dead.hit("k", limit=1, window_s=1)
    dead.close()


def test_killed_redis_falls_back_to_the_database_with_a_log_line_and_a_metric(
        pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    server = RedisServer()
    try:
        redis_url = server.start()
    except RedisUnavailable as exc:
        missing(f"REDIS NOT AVAILABLE, Redis fault test NOT RUN: {exc}")
    a = Gateway(Store.open(pg_url), redis_url=redis_url, shared_rate_limits=True)
    b = Gateway(Store.open(pg_url), redis_url=redis_url, shared_rate_limits=True)
    try:
        a.registry.register(pong)
        a.registry.put_profile(Profile(
            name="p", autonomy=Autonomy(2), activations=(Activation(tool="pong"),),
            limits=Limits(rate=(RateLimit(limit=3, window_s=60, per="agent"),))))
        a.registry.put_agent(Agent(name="bot", profile="p"))
        b.reload()
        server.stop()  # Redis gone: the two gateways still share one count, the database's
        with caplog.at_level(logging.WARNING, logger="toolkeeper.limits"):
            results = [gw.call_sync("pong", arguments={"n": i}, agent="bot")
                       for i, gw in enumerate((a, b, a, b))]
        assert [r.reason for r in results[:3]] == [None] * 3
        assert results[3].reason == Reason.RATE_LIMITED
        assert "rate limit counted in the database" in caplog.text
        assert b'toolkeeper_redis_fallbacks_total{use="rate_limit"} 2.0' in a.metrics.render()
    finally:
        a.close()
        b.close()
        server.stop()


def test_two_gateways_share_one_rate_limit_and_hear_changes(redis_url: str,
                                                           tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/tk.db"
    a = Gateway(Store.open(url), redis_url=redis_url)
    b = Gateway(Store.open(url), redis_url=redis_url)
    try:
        a.registry.register(pong)
        a.registry.put_profile(Profile(
            name="p", autonomy=Autonomy(2), activations=(Activation(tool="pong"),),
            limits=Limits(rate=(RateLimit(limit=3, window_s=60, per="agent"),))))
        a.registry.put_agent(Agent(name="bot", profile="p"))
        # announced through Redis, not polled: well within 5 s
        wait_until(lambda: ("default", "bot") in b.catalog.agents, timeout=5,
                   what="the agent reaches the other gateway through Redis")
        results = [gw.call_sync("pong", arguments={"n": i}, agent="bot")
                   for i, gw in enumerate((a, b, a, b))]
        assert [r.reason for r in results] == [None, None, None, Reason.RATE_LIMITED]
    finally:
        a.close()
        b.close()
