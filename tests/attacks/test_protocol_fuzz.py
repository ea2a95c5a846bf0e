"""Protocol fuzzing attack suite: hypothesis-generated REST bodies and JSON-RPC messages —
deep nesting, huge numbers, invalid UTF-8, duplicate keys, wrong types — get a 4xx with the
documented error shape ``{"error": {"reason", "message"}}`` (REST) or a JSON-RPC error / 4xx
(``/mcp``), never a 5xx, and the app keeps serving. Bounded example counts keep it short."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.identity_fixtures import identity_api
from tests.attacks.table import ProbeTable
from tests.support.rest import RestClient

TARGETS = ("/tools/execute", "/tools/execute-batch", "/tools", "/profiles", "/agents",
           "/tokens", "/approvals/zz-none/approve", "/calls/zz-none/resolve",
           "/retrieval/pipelines")
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**400),
                                                           max_value=10**400),
                    st.floats(allow_nan=False), st.text(max_size=20))
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)),
    max_leaves=20)


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


RAW = st.one_of(
    values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),  # invalid UTF-8 and garbage
    st.integers(min_value=50, max_value=20_000).map(_deep),  # deep nesting
    st.sampled_from([b'{"tool": "echo", "tool": 1}', b'{"arguments": {"a": 1, "a": 2}}',
                     b"\xff\xfe{}", b'{"tool": "\xc3\x28"}', b"9" * 5000, b"[" * 10000,
                     b'{"tool": 1e999999}', b'{"tool": "echo", "arguments": []}']),
)
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestClient]:
    with identity_api(Path(tmp_path_factory.mktemp("fuzz"))) as client:
        yield client


def _rest_held(resp: Any) -> bool:
    if resp.status_code >= 500:
        return False
    if resp.status_code < 400:
        return True
    error = resp.json().get("error", {})
    return isinstance(error.get("reason"), str) and isinstance(error.get("message"), str)


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURE_OK)
@given(body=RAW, target=st.sampled_from(TARGETS), role=st.sampled_from(["admin", "agent"]))
def test_rest_bodies_get_documented_4xx(api: RestClient, body: bytes, target: str,
                                        role: str) -> None:
    resp = api.call("POST", target, role, content=body,
                    headers={"Content-Type": "application/json"})
    assert _rest_held(resp), (target, body[:80], resp.status_code, resp.text[:200])


MCP_HEADERS = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
rpc = st.fixed_dictionaries({"jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
                             "method": st.one_of(st.sampled_from(
                                 ["initialize", "tools/list", "tools/call", "ping", "x/y"]),
                                 values),
                             "id": st.one_of(st.integers(), st.text(max_size=5), values),
                             "params": values})


@settings(max_examples=100, deadline=None, suppress_health_check=FIXTURE_OK)
@given(body=st.one_of(rpc.map(lambda m: json.dumps(m).encode()), RAW,
                      st.lists(rpc, max_size=3).map(lambda m: json.dumps(m).encode())))
def test_mcp_messages_never_get_a_5xx(api: RestClient, body: bytes) -> None:
    resp = api.call("POST", "/mcp", "agent", content=body, headers=MCP_HEADERS)
    assert resp.status_code < 500, (body[:80], resp.status_code, resp.text[:200])


def test_fuzz_table_and_still_serving(api: RestClient) -> None:
    """The named hostile inputs as a table, then the app still answers a real call."""
    table = ProbeTable("protocol fuzzing (named inputs)")
    named = {"deep nesting 20k": _deep(20_000), "huge integer": b'{"tool": ' + b"9" * 5000
             + b"}", "invalid UTF-8": b'{"tool": "\xff\xfe"}',
             "duplicate keys": b'{"tool": "echo", "tool": "wire", "arguments": {}}',
             "wrong types": b'{"tool": ["echo"], "arguments": "text"}',
             "1e999999": b'{"tool": 1e999999}', "empty": b"", "array": b"[" * 10000}
    for name, body in named.items():
        for target in ("/tools/execute", "/profiles"):
            resp = api.call("POST", target, "admin", content=body,
                            headers={"Content-Type": "application/json"})
            reason = resp.json().get("error", {}).get("reason", "") if resp.status_code >= 400 \
                else ""
            table.add(f"REST {target} {name}", "4xx documented", f"{resp.status_code} {reason}",
                      _rest_held(resp) and resp.status_code >= 400)
        mcp = api.call("POST", "/mcp", "agent", content=body, headers=MCP_HEADERS)
        table.add(f"MCP {name}", "no 5xx", str(mcp.status_code), mcp.status_code < 500)
    ok = api.execute("agent", "echo", {"text": "still here"})
    table.add("a real call afterwards", "200", str(ok.status_code), ok.status_code == 200)
    table.check()
