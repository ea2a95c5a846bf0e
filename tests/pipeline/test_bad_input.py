"""Bad input never crashes the pipeline: every shape of arguments, tool and action names
gets a result with a stable reason; canonical digests are order- and shape-stable."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pipeline.sample_tools import add, charge
from toolkeeper import CallStatus, Reason
from toolkeeper.canonical import NotCanonicalizable, canonical_bytes, digest

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | \
    st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
    st.text(max_size=8), kids, max_size=4), max_leaves=20)
anything = json_values | st.floats() | st.binary(max_size=8) | st.tuples(st.integers()) | \
    st.sets(st.integers(), max_size=3) | st.integers(min_value=2**64, max_value=2**80)

FIXTURE_OK = [HealthCheck.function_scoped_fixture]
STOPS = {Reason.INVALID_ARGUMENTS, Reason.PAYLOAD_TOO_LARGE}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: Any) -> Any:
    from tests.pipeline.gw_helpers import build_gateway

    g = build_gateway(f"sqlite:///{tmp_path_factory.mktemp('bad')}/tk.db", tools=[add, charge])
    yield g
    g.close()


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE_OK)
@given(arguments=anything)
def test_any_argument_shape_gets_a_result(gw: Any, arguments: Any) -> None:
    res = gw.call_sync("add", arguments=arguments, agent="bot")
    if res.status is CallStatus.SUCCEEDED:
        assert isinstance(arguments, dict) and res.output == arguments["a"] + arguments["b"]
    else:
        assert res.reason in STOPS, res


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURE_OK)
@given(tool=st.text(max_size=80) | st.integers() | st.none(),
       action=st.text(max_size=80) | st.integers() | st.none())
def test_any_tool_and_action_name_gets_a_reason(gw: Any, tool: Any, action: Any) -> None:
    res = gw.call_sync(tool, action, {"a": 1, "b": 2}, agent="bot")
    if res.status is not CallStatus.SUCCEEDED:
        assert res.reason in {Reason.TOOL_NOT_FOUND, Reason.ACTION_NOT_FOUND}


@settings(max_examples=100, deadline=None, suppress_health_check=FIXTURE_OK)
@given(key=st.text(max_size=300) | st.integers() | st.binary(max_size=5))
def test_any_idempotency_key_is_handled(gw: Any, key: Any) -> None:
    res = gw.call_sync("charge", arguments={"invoice": "i", "amount": 1}, agent="bot",
                       idempotency_key=key)
    assert res.status in (CallStatus.SUCCEEDED, CallStatus.DENIED)
    if res.status is CallStatus.DENIED:
        assert res.reason in (Reason.INVALID_ARGUMENTS, Reason.IDEMPOTENCY_KEY_REUSED)


def test_huge_payloads_are_refused_before_validation(gw: Any) -> None:
    res = gw.call_sync("add", arguments={"a": 1, "b": 2, "x": "y" * 2_000_000}, agent="bot")
    assert res.reason == Reason.PAYLOAD_TOO_LARGE


def test_deeply_nested_arguments_are_refused_cleanly(gw: Any) -> None:
    nested: Any = 1
    for _ in range(5000):
        nested = [nested]
    res = gw.call_sync("add", arguments={"a": nested, "b": 1}, agent="bot")
    assert res.reason == Reason.INVALID_ARGUMENTS


def _same_as_rfc8785(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except Exception:
        with pytest.raises(NotCanonicalizable):
            canonical_bytes(value)
        return
    assert canonical_bytes(value) == expected


@given(value=json_values)
def test_canonical_bytes_match_rfc8785(value: Any) -> None:
    _same_as_rfc8785(value)


@pytest.mark.parametrize("value", [2**53 - 1, -(2**53) + 1, 2**53, -(2**53), 2**60, "x", True])
def test_an_objects_integers_beyond_the_safe_range_are_not_canonical(value: Any) -> None:
    """The fast path judges an object's strings and integers itself (no call per value):
    integers beyond ±(2**53 - 1) still go to the reference implementation, which refuses
    them (hypothesis rarely draws one)."""
    _same_as_rfc8785({"a": value})


@given(value=st.dictionaries(st.text(max_size=6), json_scalars, max_size=6))
def test_digest_ignores_key_order_and_whitespace(value: dict[str, Any]) -> None:
    try:
        d1 = digest(value)
    except NotCanonicalizable:
        return
    reordered = dict(reversed(list(value.items())))
    assert digest(reordered) == d1
    roundtrip = json.loads(json.dumps(value, indent=3))
    assert digest(roundtrip) == d1


@pytest.mark.parametrize(("arguments", "pointer"), [
    ({"a": 1, "b": 2, "x": "\ud800"}, "/x"),
    ({"a": 1, "b": 2, "x": {"y": ["fine", "bad\udc00"]}}, "/x/y/1"),
    ({"a": 1, "b": 2, "\udfff": "key"}, "/\\udfff"),
    ({"a": 1, "b": 2, "x": 1.5e300, "y": "\ud800"}, "/y"),  # the non-fast canonical path
])
def test_lone_surrogates_are_invalid_arguments_with_their_pointer(
        gw: Any, arguments: dict[str, Any], pointer: str) -> None:
    res = gw.call_sync("add", arguments=arguments, agent="bot")
    assert res.reason == Reason.INVALID_ARGUMENTS
    assert [e["pointer"] for e in res.details["errors"]] == [pointer]


def test_lone_surrogates_in_names_and_ids_are_refused_and_audited(gw: Any) -> None:
    res = gw.call_sync("add\ud800", arguments={"a": 1, "b": 2}, agent="bot",
                       turn_group_id="t\udfff", idempotency_key="k\ud800")
    assert res.reason == Reason.INVALID_ARGUMENTS
    pointers = {e["pointer"] for e in res.details["errors"]}
    assert pointers == {"/tool", "/turn_group_id", "/idempotency_key"}
    gw.flush()
    events = gw.store.audit.list("default", call_id=res.call_id)
    assert [e.type for e in events] == ["policy.denied"]
    assert events[0].tool == "add\\ud800"
    assert gw.store.audit.verify("default").ok
