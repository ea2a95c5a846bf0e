"""Tokens looked up from an event loop: a burst of requests with one token not yet verified
shares one store look-up (one worker thread, one connection), a caller that goes away leaves
it to the others, and unknown or revoked tokens stay refused."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.gateway import Gateway
from toolkeeper.token_cache import TokenCache

BURST = 32
WAIT_S = 10.0
"""Bound on every wait here (never reached when the code is right)."""


class SlowTokens:
    """A token repository whose look-ups block until released, counting them."""

    def __init__(self, repo: Any) -> None:
        self._repo = repo
        self.generation = repo.generation
        self.finds = 0
        self.release = threading.Event()

    def find(self, token: str) -> Any:
        self.finds += 1
        assert self.release.wait(WAIT_S)
        return self._repo.find(token)


@pytest.fixture
def gw(tmp_path: Path) -> Any:
    with Gateway.open(f"sqlite:///{tmp_path}/t.db") as g:
        yield g


async def test_a_burst_on_a_cold_cache_shares_one_lookup(gw: Gateway) -> None:
    _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    slow = SlowTokens(gw.store.tokens)
    cache = TokenCache(slow)
    callers = [asyncio.create_task(cache.authenticate_async(token)) for _ in range(BURST)]
    await asyncio.sleep(0.05)  # every caller is waiting on the one look-up
    slow.release.set()
    found = await asyncio.wait_for(asyncio.gather(*callers), WAIT_S)
    assert slow.finds == 1
    assert {p.agent for p in found} == {"bot"}
    assert cache.cached(token) is not None  # later requests need no thread at all
    assert await cache.authenticate_async(token) == found[0]
    assert slow.finds == 1


async def test_a_caller_that_goes_away_leaves_the_lookup_to_the_others(gw: Gateway) -> None:
    _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    slow = SlowTokens(gw.store.tokens)
    cache = TokenCache(slow)
    first = asyncio.create_task(cache.authenticate_async(token))
    second = asyncio.create_task(cache.authenticate_async(token))
    await asyncio.sleep(0.05)
    first.cancel()
    slow.release.set()
    with pytest.raises(asyncio.CancelledError):
        await first
    who = await asyncio.wait_for(second, WAIT_S)
    assert who is not None and who.agent == "bot"
    assert slow.finds == 1


async def test_unknown_and_revoked_tokens_are_refused_and_looked_up_again(gw: Gateway) -> None:
    record, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    assert await gw.authenticate_async("tk_not-a-token") is None
    assert await gw.authenticate_async("") is None
    assert await gw.authenticate_async(token) is not None
    gw.store.tokens.revoke(record.id)
    assert await gw.authenticate_async(token) is None  # the cache was dropped: asked again


async def test_a_failed_lookup_fails_every_waiter_and_is_not_kept(gw: Gateway) -> None:
    _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")

    class Broken(SlowTokens):
        def find(self, token: str) -> Any:
            self.finds += 1
            assert self.release.wait(WAIT_S)
            raise OSError("database is gone")

    broken = Broken(gw.store.tokens)
    cache = TokenCache(broken)
    callers = [asyncio.create_task(cache.authenticate_async(token)) for _ in range(3)]
    await asyncio.sleep(0.05)
    broken.release.set()
    results = await asyncio.wait_for(asyncio.gather(*callers, return_exceptions=True), WAIT_S)
    assert all(isinstance(r, OSError) for r in results) and broken.finds == 1
    with pytest.raises(OSError):  # the next request asks the store again
        await asyncio.wait_for(cache.authenticate_async(token), WAIT_S)
    assert broken.finds == 2
