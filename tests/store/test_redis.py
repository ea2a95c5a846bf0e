"""Optional Redis (SPEC §12): rate limits counted across gateways, changes announced."""

from __future__ import annotations

from pathlib import Path

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


def test_unreachable_redis_allows_rather_than_failing() -> None:
    dead = RedisCounters("redis://127.0.0.1:1/0", timeout_s=0.2)
    assert dead.hit("k", limit=1, window_s=1) is None
    dead.close()


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
