"""Awaiting a tool's coroutine under its timeout, without a timer when none is needed.

A timer (``asyncio.timeout``) costs ~3.5 µs per call here, and it can only act when the
coroutine suspends: a tool that returns (or raises) without ever suspending is never
interrupted by it. So the coroutine's first step runs at once; only if it suspends is the
rest awaited under a timer whose deadline is counted from the start, exactly as if the whole
call had run inside ``asyncio.timeout(timeout_s)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from types import CoroutineType
from typing import Any, TypeVar

T = TypeVar("T")


async def within(coro: Awaitable[T], timeout_s: float | None) -> T:
    """``await coro`` bounded by ``timeout_s`` seconds (``None``: unbounded); raises
    ``TimeoutError`` when the bound passes while the coroutine is suspended."""
    if type(coro) is not CoroutineType:  # a future or another awaitable: no first step
        async with asyncio.timeout(timeout_s):
            return await coro
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    try:
        first = coro.send(None)
    except StopIteration as done:  # finished without suspending: no timer was needed
        return done.value  # type: ignore[no-any-return]
    async with asyncio.timeout_at(deadline):
        rest: T = await _Rest(coro, first)
        return rest


class _Rest:
    """The rest of a coroutine whose first step already ran and yielded ``first``: passes
    what the event loop sends or throws on to it, as ``await`` itself would."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._first
        self._first = None
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation (the timer's, or the caller's)
                try:
                    value = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as done:
                    return done.value
