"""What an upstream's InputRequiredResult may hold before it is relayed to an agent
(toolkeeper.upstream.asking): bounded in count, size and kind, checked as the SDK reads it."""

from __future__ import annotations

from typing import Any

import pytest

from toolkeeper.upstream import asking

ASK = {"method": "elicitation/create", "params": {
    "message": "Name?", "requestedSchema": {"type": "object", "properties": {
        "name": {"type": "string"}}}}}


def test_a_well_formed_round_is_read_as_sent() -> None:
    sent = {"resultType": "input_required", "inputRequests": {"q": ASK,
            "r": {"method": "roots/list", "params": {}}}, "requestState": "s-1"}
    assert asking.questions(sent) == (sent["inputRequests"], "s-1")
    assert asking.needed(sent["inputRequests"]) == {"elicitation", "roots"}
    assert asking.questions({"requestState": "later"}) == ({}, "later")


@pytest.mark.parametrize("bad", [
    {},  # neither questions nor state
    {"inputRequests": ["not", "a", "map"]},
    {"inputRequests": {f"k{i}": ASK for i in range(asking.MAX_REQUESTS + 1)}},
    {"inputRequests": {"q": {"method": "tools/call", "params": {}}}},  # not a question
    {"inputRequests": {"q": {"method": "elicitation/create", "params": {"message": 5}}}},
    {"inputRequests": {"": ASK}},
    {"inputRequests": {"q": ASK}, "requestState": 7},
    {"inputRequests": {"q": ASK}, "requestState": "x" * (asking.MAX_STATE_CHARS + 1)},
    {"inputRequests": {"q": {**ASK, "params": {**ASK["params"],
                                               "message": "m" * asking.MAX_QUESTIONS_CHARS}}}},
])
def test_a_malformed_or_oversized_round_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        asking.questions({"resultType": "input_required", **bad})
