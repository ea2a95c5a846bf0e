"""``wait_until``, the suite's bounded poll: the first truthy value, or a clear timeout."""

from __future__ import annotations

import itertools

import pytest

from tests.support.waiting import wait_until


def test_returns_the_first_truthy_value() -> None:
    values = iter([None, 0, "", "ready", "later"])
    assert wait_until(lambda: next(values), interval=0, what="a value") == "ready"


def test_a_timeout_names_what_did_not_happen_and_the_last_value() -> None:
    with pytest.raises(TimeoutError, match=r"not within 0 s: the door opens \(last seen: ''\)"):
        wait_until(lambda: "", timeout=0, what="the door opens")


def test_ignored_exceptions_count_as_not_yet() -> None:
    attempts = itertools.count()

    def listening() -> int:
        n = next(attempts)
        if n < 2:
            raise ConnectionError("not listening yet")
        return n

    assert wait_until(listening, interval=0, what="a connection",
                      ignoring=(ConnectionError,)) == 2


def test_an_ignored_exception_is_the_last_thing_seen_at_the_timeout() -> None:
    def refusing() -> bool:
        raise ConnectionError("not listening yet")

    with pytest.raises(TimeoutError, match=r"ConnectionError\('not listening yet'\)"):
        wait_until(refusing, timeout=0, what="a connection", ignoring=(ConnectionError,))


def test_other_exceptions_propagate_at_once() -> None:
    with pytest.raises(ValueError, match="broken"):
        wait_until(lambda: int("broken"), what="a number", ignoring=(ConnectionError,))
