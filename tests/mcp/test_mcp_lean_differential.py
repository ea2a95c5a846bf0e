"""Issue 12 item 1: the lean MCP path answers exactly as the official SDK does. Each
request — valid and malformed, allowed, refused and gated — goes to the same server with
the lean path on and then off (``mcp_fast_path``), and both answers must match: status,
content type and JSON body (ids minted per call normalised); so must the audit records
each wrote (:mod:`tests.support.audit_diff`). The lean path must answer each request
itself — a spy on its answer step counts it — except the cases it leaves to the SDK by
design (:data:`SDK_ONLY`). The tests at the end break the lean path on purpose and show
the differential catching it (issue 26)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp_fixtures import MINTED, McpServer, serving_endpoint

from tests.support.audit_diff import mark
from tests.support.lean_spy import (
    ANSWERED,
    NEEDS_SDK,
    SDK_REFUSES,
    as_sent,
    breaking,
    check_took,
    counted,
    own_task_id,
    same,
    written,
)
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.mcp import lean

V = "2026-07-28"
HEADERS = {"Accept": "application/json, text/event-stream",
           "Content-Type": "application/json", "MCP-Protocol-Version": V}
META = {"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpServer, Any]]:
    with pytest.MonkeyPatch.context() as mp, \
            serving_endpoint(f"sqlite:///{tmp_path_factory.mktemp('lean')}/tk.db") as served:
        mp.setattr(lean, "answer", counted(lean.answer))
        # the endpoint builds its face with the SDK's app, on the first request: until then
        # every request goes to the SDK
        assert _send(served[0], "bot", LIST, HEADERS)["status"] == 200
        yield served


def _call(name: str, arguments: Any = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": META, "name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


def _routing(body: Any) -> dict[str, str]:
    """The ``Mcp-Method`` / ``Mcp-Name`` headers a 2026-07-28 client sends."""
    if not isinstance(body, dict) or not isinstance(body.get("method"), str):
        return {}
    name = (body.get("params") or {}).get("name") if isinstance(body.get("params"), dict) \
        else None
    return {"Mcp-Method": body["method"], **({"Mcp-Name": name} if isinstance(name, str)
                                              else {})}


def _send(srv: McpServer, who: str, body: Any,
          headers: dict[str, str] | list[tuple[str, str]]) -> dict[str, Any]:
    """``headers``: a dict (with the routing headers the body implies) or the exact lines."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    auth = ("Authorization", f"Bearer {srv.tokens[who]}")
    lines = [*headers, auth] if isinstance(headers, list) else \
        [*{**_routing(body), **headers}.items(), auth]
    resp = httpx.post(srv.url, content=raw, timeout=10, headers=lines)
    text = MINTED.sub("<id>", resp.text.replace('"call_id":"', '"call_id": "'))
    kind = resp.headers.get("content-type", "").split(";")[0]
    return {"status": resp.status_code, "type": kind,
            "session": "mcp-session-id" in resp.headers,
            "body": json.loads(text) if kind == "application/json" and text else text}


def _same(srv: tuple[McpServer, Any], who: str, body: Any,
          headers: dict[str, str] | list[tuple[str, str]] | None = None, *,
          lean: bool = True) -> dict[str, Any]:
    """Both paths' answers and the audit records each wrote, which must be equal. A
    ``$path`` in the body becomes the path's name, so calls that leave state (a pending
    approval) do not meet each other's. ``lean``: whether the lean path must answer the
    request itself (else it must leave it to the SDK: a request it does not take)."""
    server, endpoint = srv
    answers, records = [], []
    for on in (True, False):
        endpoint.fast_path = on
        side = "lean" if on else "sdk"
        sent = as_sent(body, side)
        before, since = len(ANSWERED), mark(server.gw)
        try:
            answers.append(_send(server, who, sent, headers or HEADERS))
        finally:
            endpoint.fast_path = True
        records.append(written(server.gw, since, side, sent))
        check_took(before, side, lean=lean, on=on)
    return same(answers, records)


LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
CASES: dict[str, tuple[str, Any]] = {
    "list": ("bot", LIST),
    "list for a narrower agent": ("reader", LIST),
    "list with a string id": ("bot", {**LIST, "id": "req-1"}),
    "list with a huge id": ("bot", {**LIST, "id": 2**62}),
    "list with a null id": ("bot", {**LIST, "id": None}),
    "list with a cursor": ("bot", {**LIST, "params": {"_meta": META, "cursor": "x"}}),
    "list without _meta": ("bot", {**LIST, "params": {}}),
    "a notification": ("bot", {"jsonrpc": "2.0", "method": "tools/list",
                               "params": {"_meta": META}}),
    "call": ("bot", _call("add", {"a": 2, "b": 3})),
    "call with no arguments": ("bot", _call("add")),
    "call with bad arguments": ("bot", _call("add", {"a": "two"})),
    "call with arguments not an object": ("bot", _call("add", [1, 2])),
    "call with a name not a string": ("bot", _call(5, {"a": 1})),  # type: ignore[arg-type]
    "call without a name": ("bot", {**_call("add"), "params": {"_meta": META}}),
    "call of an unknown tool": ("bot", _call("nope", {})),
    "call of a tool not in the profile": ("reader", _call("pay", {"invoice": "i",
                                                                  "amount": 1})),
    "call needing an approver": ("intern", _call("pay", {"invoice": "$path", "amount": 1})),
    "call needing confirmation": ("sup", _call("pay", {"invoice": "$path", "amount": 1})),
    "call with an unknown param": ("bot", _call("add", {"a": 1, "b": 1}, extra=1)),
    "call with a progress token": ("bot", _call("add", {"a": 1, "b": 1}, _meta={
        **META, "progressToken": "p"})),
    "call as the SDK client sends it": ("bot", _call("add", {"a": 1, "b": 1}, _meta={
        **META, "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"}})),
    "call with a bad clientInfo": ("bot", _call("add", {"a": 1, "b": 1}, _meta={
        **META, "io.modelcontextprotocol/clientInfo": {"name": 5}})),
    "wrong jsonrpc version": ("bot", {**_call("add", {"a": 1, "b": 1}), "jsonrpc": "1.0"}),
    "a batch": ("bot", [LIST]),
    "a boolean id": ("bot", {**LIST, "id": True}),
    "unsupported version in _meta": ("bot", {**LIST, "params": {"_meta": {
        **META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}}),
    "malformed JSON": ("bot", b'{"jsonrpc": "2.0", "id": 1, "method": '),
}


SDK_ONLY = {
    "list with a null id": SDK_REFUSES,
    "list with a cursor": NEEDS_SDK + " (pagination)",
    "list without _meta": SDK_REFUSES + " (a 2026-07-28 request carries its version)",
    "a notification": NEEDS_SDK + " (no id: 202, nothing answered)",
    "call with arguments not an object": SDK_REFUSES,
    "call with a name not a string": SDK_REFUSES,
    "call without a name": SDK_REFUSES,
    "call with an unknown param": NEEDS_SDK + " (a param it may read)",
    "call with a progress token": NEEDS_SDK + " (progress notifications)",
    "call with a bad clientInfo": SDK_REFUSES,
    "wrong jsonrpc version": SDK_REFUSES,
    "a batch": SDK_REFUSES,
    "a boolean id": SDK_REFUSES,
    "unsupported version in _meta": SDK_REFUSES,
    "malformed JSON": SDK_REFUSES,
}
"""The cases the lean path leaves to the SDK by design (:func:`lean.plan` is ``None``): for
them the differential checks the hand-over and that the lean path did not answer; every
other case, refused and gated calls included, must be answered by the lean path."""


@pytest.mark.parametrize("case", list(CASES))
def test_the_lean_path_answers_as_the_sdk_does(srv: tuple[McpServer, Any], case: str) -> None:
    who, body = CASES[case]
    _same(srv, who, body, lean=case not in SDK_ONLY)


def test_plain_calls_really_take_the_lean_path_and_succeed(
        srv: tuple[McpServer, Any]) -> None:
    answer = _same(srv, "bot", _call("add", {"a": 2, "b": 3}))
    assert answer["status"] == 200 and answer["body"]["result"]["isError"] is False
    server, endpoint = srv
    seen: list[str] = []
    original = endpoint.face.list_for

    def spy(who: Any) -> Any:
        seen.append(who.agent)
        return original(who)
    endpoint.face.list_for = spy
    try:
        _send(server, "bot", LIST, HEADERS)
    finally:
        del endpoint.face.list_for
    assert seen == ["bot"]


@pytest.mark.parametrize(("headers", "lean_path"), [
    ({**HEADERS, "Accept": "application/json"}, False),
    ({**HEADERS, "Accept": "text/event-stream"}, False),
    ({**HEADERS, "Mcp-Method": "tools/call"}, False),
    ({**HEADERS, "Mcp-Name": "add"}, True),
    ({**HEADERS, "MCP-Protocol-Version": "2025-11-25"}, False),
    ({**HEADERS, "Host": "evil.example"}, False),
    ({**HEADERS, "Origin": "http://evil.example"}, False),
    ({**HEADERS, "Origin": "http://127.0.0.1"}, True),
    ({**HEADERS, "Content-Type": "text/plain"}, False),
    ({**HEADERS, "Host": "127.0.0.1:1"}, True),
])
def test_unusual_headers_get_the_same_answer(srv: tuple[McpServer, Any],
                                             headers: dict[str, str], lean_path: bool) -> None:
    """``lean_path``: whether the lean path takes the request (the transport check, which
    refuses a foreign Host or Origin, and an unusual Accept or version leave it to the
    SDK)."""
    _same(srv, "bot", LIST, headers, lean=lean_path)


CALL_LINES = [*HEADERS.items(), ("Mcp-Method", "tools/call"), ("Mcp-Name", "add")]


@pytest.mark.parametrize(("lines", "lean_path"), [
    (CALL_LINES, True),
    ([*CALL_LINES, ("mcp-name", "add")], False),
    ([*CALL_LINES, ("MCP-Protocol-Version", V)], False),
    ([*CALL_LINES, ("Mcp-Param-Region", "eu")], False),
    ([*CALL_LINES, ("Accept", "application/json")], False),  # the last one counts
])
def test_repeated_and_extra_header_lines_get_the_same_answer(
        srv: tuple[McpServer, Any], lines: list[tuple[str, str]], lean_path: bool) -> None:
    """A routing header sent twice (the SDK refuses it) or an ``Mcp-Param-*`` header the
    lean path does not read leave the request to the SDK; of the other headers it reads,
    the last line counts, as in the SDK's folded mapping."""
    _same(srv, "bot", _call("add", {"a": 1, "b": 2}), lines, lean=lean_path)


def test_a_refused_host_stays_refused_after_allowed_ones_passed(
        srv: tuple[McpServer, Any]) -> None:
    """The lean path remembers header triples that passed the transport check, never
    refusals: the same evil Host is refused every time, between allowed requests."""
    for _ in range(2):
        assert _same(srv, "bot", LIST)["status"] == 200
        assert _same(srv, "bot", LIST, {**HEADERS, "Host": "evil.example"},
                     lean=False)["status"] == 421


def test_the_transport_check_reads_the_first_of_each_header_in_any_case() -> None:
    from toolkeeper.mcp.http import security_inputs

    headers = [(b"Host", b"a:1"), (b"origin", b"http://o"), (b"host", b"b:2"),
               (b"CONTENT-TYPE", b"application/json"), (b"content-type", b"text/plain")]
    assert security_inputs(headers) == (b"application/json", b"a:1", b"http://o")
    assert security_inputs([]) == (None, None, None)


def test_operators_can_turn_the_lean_path_off(tmp_path: Any) -> None:
    from toolkeeper import Gateway

    gw = Gateway.open(f"sqlite:///{tmp_path}/tk.db")
    try:
        assert create_app(gw, ApiSettings()).state.mcp.fast_path is True
        assert create_app(gw, ApiSettings(mcp_fast_path=False)).state.mcp.fast_path is False
    finally:
        gw.close()


def test_the_server_setting_reads_its_environment_variable() -> None:
    from toolkeeper.server import ServerSettings

    assert ServerSettings.load({}).mcp_fast_path is True
    assert ServerSettings.load({"TOOLKEEPER_MCP_FAST_PATH": "false"}).mcp_fast_path is False


# -- the differential catches a broken lean path ------------------------------------------


def test_a_lean_path_answering_another_status_is_caught(
        srv: tuple[McpServer, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    async def change(counting: Any, face: Any, who: Any, job: Any) -> Any:
        _, reply = await counting(face, who, job)
        return 202, reply
    breaking(monkeypatch, change)
    with pytest.raises(AssertionError, match='"status": 202'):
        _same(srv, "bot", _call("add", {"a": 2, "b": 3}))


def test_a_lean_path_writing_other_audit_records_is_caught(
        srv: tuple[McpServer, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # the lean path gives the pipeline a call with a task id of its own: the answers are
    # still the same, only the audit records show it
    breaking(monkeypatch, own_task_id)
    with pytest.raises(AssertionError, match="audit records differ"):
        _same(srv, "intern", _call("pay", {"invoice": "$path", "amount": 1}))


def test_a_lean_path_that_answers_nothing_itself_is_caught(
        srv: tuple[McpServer, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # leaving everything to the SDK would make the differential compare the SDK with
    # itself: the count of what the lean path answered shows it
    monkeypatch.setattr(lean, "plan", lambda *args: None)
    with pytest.raises(AssertionError, match="the lean path answered nothing"):
        _same(srv, "bot", _call("add", {"a": 2, "b": 3}))
