"""Per-turn call caps and concurrency slots shared by every process (SPEC §12): on the
database (SQLite and PostgreSQL) and on Redis, exact under concurrency; a slot whose holder
died comes back when its lease expires. Every wait is a bounded poll."""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from toolkeeper import (
    Activation,
    Agent,
    Autonomy,
    ExecutionMeta,
    Gateway,
    Limits,
    Profile,
    Reason,
    Risk,
    SideEffect,
    tool,
)
from toolkeeper.store import Store
from toolkeeper.store.redis import RedisCounters


@pytest.fixture(params=["database", "redis"])
def caps(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The shared backend: the database's (SQLite here; PostgreSQL in the replica tests and
    below) or Redis's."""
    if request.param == "database":
        store = Store.open(f"sqlite:///{tmp_path}/caps.db")
        yield store.caps
        store.close()
    else:
        counters = RedisCounters(request.getfixturevalue("redis_url"),
                                 prefix=f"caps-{tmp_path.name}")
        yield counters
        counters.close()


def _eventually(predicate: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_turn_counts_up_to_its_cap_exactly_under_concurrency(caps: Any) -> None:
    with cf.ThreadPoolExecutor(16) as pool:
        counted = list(pool.map(lambda _: caps.count_turn("t:bot:turn-1", 7, 60), range(40)))
    assert sum(counted) == 7
    assert caps.count_turn("t:bot:turn-2", 7, 60)  # another turn has its own count


def test_a_turn_counter_starts_again_once_expired(caps: Any) -> None:
    assert caps.count_turn("short", 1, 0.05)
    assert _eventually(lambda: caps.count_turn("short", 1, 0.05))


def test_slots_are_exact_under_concurrency_and_released(caps: Any) -> None:
    with cf.ThreadPoolExecutor(16) as pool:
        leases = list(pool.map(lambda _: caps.acquire_slot("t:g", 3, 60), range(30)))
    held = [lease for lease in leases if lease is not None]
    assert len(held) == 3
    caps.release_slot("t:g", held[0])
    assert caps.acquire_slot("t:g", 3, 60) is not None
    assert caps.acquire_slot("t:g", 3, 60) is None
    assert caps.acquire_slot("t:other", 1, 60) is not None  # groups are independent


def test_a_dead_holders_slot_comes_back_when_its_lease_expires(caps: Any) -> None:
    assert caps.acquire_slot("t:crash", 1, 0.2) is not None  # never released: "crashed"
    assert caps.acquire_slot("t:crash", 1, 60) is None
    assert _eventually(lambda: caps.acquire_slot("t:crash", 1, 60) is not None)


def test_slots_on_postgresql_are_exact_under_concurrency(pg_url: str) -> None:
    store = Store.open(pg_url)
    try:
        with cf.ThreadPoolExecutor(16) as pool:
            leases = list(pool.map(lambda _: store.caps.acquire_slot("t:g", 2, 60), range(30)))
            counted = list(pool.map(lambda _: store.caps.count_turn("k", 5, 60), range(30)))
        assert sum(lease is not None for lease in leases) == 2
        assert sum(counted) == 5
    finally:
        store.close()


# through the gateway ---------------------------------------------------------------------

@tool(side_effect=SideEffect.IDEMPOTENT, risk=Risk.LOW, inline=True)
def flaky(fail: bool) -> str:
    """Fails on request: its concurrency slot must be released all the same."""
    if fail:
        raise RuntimeError("asked to fail")
    return "ok"


def _gateway(url: str, **kw: Any) -> Gateway:
    gw = Gateway(Store.open(url), shared_rate_limits=True, **kw)
    gw.registry.register(flaky, execution=ExecutionMeta(
        concurrency_group="single", max_concurrency=1, timeout_s=0.5, max_retries=0))
    gw.registry.put_profile(Profile(
        name="p", autonomy=Autonomy(2), activations=(Activation(tool="flaky"),),
        limits=Limits(max_calls_per_turn=3)), replace=True)
    gw.registry.put_agent(Agent(name="bot", profile="p"), replace=True)
    return gw


def test_a_failed_call_releases_its_shared_slot(db_url: str) -> None:
    with _gateway(db_url) as gw:
        assert gw.call_sync("flaky", arguments={"fail": True}, agent="bot").reason == \
            Reason.TOOL_ERROR
        assert gw.call_sync("flaky", arguments={"fail": False}, agent="bot").ok


def test_gateways_on_one_database_share_a_turn_cap(db_url: str) -> None:
    a, b = _gateway(db_url), Gateway(Store.open(db_url), shared_rate_limits=True)
    try:
        b.reload()
        results = [gw.call_sync("flaky", arguments={"fail": False}, agent="bot",
                                turn_group_id="t1") for gw in (a, b, a, b)]
        assert [r.reason for r in results] == [None, None, None, Reason.CALL_LIMIT_EXCEEDED]
    finally:
        a.close()
        b.close()


def test_unreachable_redis_still_caps_turns_in_the_process(tmp_path: Path) -> None:
    with _gateway(f"sqlite:///{tmp_path}/tk.db", redis_url="redis://127.0.0.1:1/0") as gw:
        results = [gw.call_sync("flaky", arguments={"fail": False}, agent="bot",
                                turn_group_id="t1") for _ in range(4)]
        assert [r.reason for r in results] == [None, None, None, Reason.CALL_LIMIT_EXCEEDED]


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW, inline=True)
def plain(n: int) -> int:
    """Pure, with no concurrency group."""
    return n


def test_a_call_without_cap_or_group_never_touches_the_shared_tables(db_url: str) -> None:
    seen: list[str] = []
    with Gateway(Store.open(db_url), shared_rate_limits=True) as gw:
        gw.registry.register(plain)
        gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(2),
                                        activations=(Activation(tool="plain"),)), replace=True)
        gw.registry.put_agent(Agent(name="bot", profile="p"), replace=True)
        event.listen(gw.store.db.engine, "before_cursor_execute",
                     lambda _c, _cur, sql, *_: seen.append(sql))
        for turn in (None, "t1"):
            assert gw.call_sync("plain", arguments={"n": 1}, agent="bot",
                                turn_group_id=turn).ok
        assert not [sql for sql in seen if "turn_counts" in sql or "concurrency_" in sql]
        gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(2),
                                        activations=(Activation(tool="plain"),),
                                        limits=Limits(max_calls_per_turn=1)), replace=True)
        assert gw.call_sync("plain", arguments={"n": 1}, agent="bot", turn_group_id="t2").ok
        assert [sql for sql in seen if "turn_counts" in sql]  # the listener does see them
