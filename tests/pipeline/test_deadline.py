"""``within``: a tool's coroutine under its timeout. A tool that never suspends runs without
a timer; one that suspends is bounded from its start, cancelled at the bound (its own
clean-up runs), and a caller's cancellation stays a cancellation."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from toolkeeper.pipeline.deadline import within

LONG_S = 30.0
"""A sleep the bound always cuts short (far past every bound these tests set)."""
PROMPT_S = 10.0
"""Loose upper bound on a timeout that is due at once (never a timing assertion)."""


def _no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: Any) -> Any:
        raise AssertionError("a timer was set for a coroutine that never suspended")

    monkeypatch.setattr(asyncio, "timeout_at", refuse)
    monkeypatch.setattr(asyncio, "timeout", refuse)


async def test_a_coroutine_that_never_suspends_runs_without_a_timer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def add(a: int, b: int) -> int:
        return a + b

    _no_timer(monkeypatch)
    assert await within(add(1, 2), 5.0) == 3


async def test_an_error_raised_before_any_suspension_is_raised_as_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken() -> None:
        raise ValueError("bad input")

    _no_timer(monkeypatch)
    with pytest.raises(ValueError, match="bad input"):
        await within(broken(), 5.0)


async def test_a_coroutine_that_suspends_gets_what_it_awaited() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[str] = loop.create_future()
    loop.call_soon(fut.set_result, "ready")
    seen = []

    async def tool() -> str:
        await asyncio.sleep(0)  # a bare yield to the loop
        value = await fut
        seen.append(value)
        await asyncio.sleep(0)
        return value.upper()

    assert await within(tool(), 5.0) == "READY"
    assert seen == ["ready"]


async def test_past_the_bound_the_tool_is_cancelled_and_timeout_error_raised() -> None:
    cleaned = []

    async def slow() -> None:
        try:
            await asyncio.sleep(LONG_S)
        finally:
            cleaned.append("finally ran")

    with pytest.raises(TimeoutError):
        await within(slow(), 0.01)
    assert cleaned == ["finally ran"]


async def test_the_bound_counts_from_the_start_not_from_the_first_suspension() -> None:
    async def busy_then_slow() -> None:
        time.sleep(0.1)  # a synchronous prefix as long as the whole bound
        await asyncio.sleep(LONG_S)

    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        await within(busy_then_slow(), 0.1)
    assert time.monotonic() - t0 < PROMPT_S  # due at its first suspension, not LONG_S later


async def test_the_tool_sees_errors_thrown_at_it_and_may_handle_them() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(LONG_S)
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # clean-up that itself suspends
            raise
        return "never"

    with pytest.raises(TimeoutError):
        await within(stubborn(), 0.01)


async def test_a_callers_cancellation_stays_a_cancellation() -> None:
    started = asyncio.Event()
    cleaned = []

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(LONG_S)
        finally:
            cleaned.append("finally ran")

    task = asyncio.create_task(within(slow(), LONG_S))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["finally ran"]


async def test_an_awaitable_that_is_not_a_coroutine_is_bounded_too() -> None:
    loop = asyncio.get_running_loop()
    never: asyncio.Future[None] = loop.create_future()
    with pytest.raises(TimeoutError):
        await within(never, 0.01)
    done: asyncio.Future[int] = loop.create_future()
    done.set_result(7)
    assert await within(done, 5.0) == 7


async def test_no_bound_means_no_timeout() -> None:
    async def quick() -> int:
        await asyncio.sleep(0)
        return 1

    assert await within(quick(), None) == 1
