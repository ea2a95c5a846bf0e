"""Issue 12 item 1, 2025-11-25 era: on an established session the lean MCP path answers
exactly as the official SDK's session does. Each request — valid and malformed, allowed,
refused and gated — goes to the same server with the lean path on and then off
(``mcp_fast_path``), each on a session of its own opened the same way, and both answers
must match: status, the session id, and the JSON-RPC messages (ids minted per call
normalised); so must the audit records each wrote (:mod:`tests.support.audit_diff`). The
lean path must answer each request itself — a spy on its answer step counts it — except
the cases it leaves to the SDK by design (:data:`SDK_ONLY`); tests below break it on
purpose and show the differential catching it (issue 26). The framing may differ, as the
transport lets it: the lean path answers a quick request with one JSON body, the SDK with
an SSE stream of one event (each stated in the tests of the answer itself below)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp_fixtures import MINTED, McpServer, connect, serving_endpoint

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
from toolkeeper.mcp import lean
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.providers.native import tool

pytestmark = pytest.mark.slow  # ~40 s here: a session opened per request and side

V = "2025-11-25"
BASE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_VARYING = {"date", "mcp-session-id", "content-length", "transfer-encoding"}
_FRAMING = {"content-type", "cache-control", "connection", "x-accel-buffering"}
"""Headers that say how the answer is framed (one JSON body or an SSE stream)."""


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)  # type: ignore[untyped-decorator]
async def nap(seconds: float) -> str:
    """Sleep, then answer (a call long enough to cancel)."""
    await asyncio.sleep(seconds)
    return "rested"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpServer, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('lean25')}/tk.db"
    with pytest.MonkeyPatch.context() as mp, serving_endpoint(db, extra=(nap,)) as served:
        mp.setattr(lean, "answer", counted(lean.answer))
        _open(served[0], "bot")  # the endpoint builds its face on its first request
        yield served


def _open(server: McpServer, who: str, capabilities: dict[str, Any] | None = None,
          *, served: bool = True) -> dict[str, str]:
    """A new initialized session as ``who``: the headers its requests carry. ``served``:
    one ``tools/list`` is answered on it first (which sets up its change delivery)."""
    headers = {**BASE, "Authorization": f"Bearer {server.tokens[who]}"}
    resp = httpx.post(server.url, headers=headers, timeout=10, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": V, "capabilities": capabilities or {},
            "clientInfo": {"name": "differential", "version": "1"}}})
    assert resp.status_code == 200, resp.text
    headers = {**headers, "Mcp-Session-Id": resp.headers["mcp-session-id"],
               "MCP-Protocol-Version": V}
    done = httpx.post(server.url, headers=headers, timeout=10,
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    if served:
        first = httpx.post(server.url, headers=headers, timeout=10,
                           json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert first.status_code == 200, first.text
    return headers


def _events(text: str) -> list[Any]:
    """The SSE events of a response: each ``data`` parsed (``event`` names kept)."""
    out: list[Any] = []
    for block in text.split("\r\n\r\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\r\n"))
        data = fields.get("data")
        out.append({"event": fields.get("event"),
                    "data": json.loads(data) if data else data})
    return out


def _send(server: McpServer, sent: Any, headers: dict[str, str]) -> dict[str, Any]:
    raw = sent if isinstance(sent, bytes) else json.dumps(sent).encode()
    resp = httpx.post(server.url, content=raw, timeout=10, headers=headers)
    text = MINTED.sub("<id>", resp.text.replace('"call_id":"', '"call_id": "'))
    kind = resp.headers.get("content-type", "").split(";")[0]
    sid = headers.get("Mcp-Session-Id")
    if kind == "text/event-stream":
        body: Any = _events(text)
    elif kind == "application/json" and text and resp.status_code == 200 and sid:
        body = [{"event": "message", "data": json.loads(text)}]  # as the one SSE event
    else:
        body = json.loads(text) if kind == "application/json" and text else text
    return {"status": resp.status_code,
            "headers": {k: v for k, v in resp.headers.items()
                        if k not in _VARYING and (k not in _FRAMING or resp.status_code != 200)},
            "same session": resp.headers.get("mcp-session-id") == sid,
            "body": body, "framing": kind}


def _same(srv: tuple[McpServer, Any], who: str, body: Any,
          adjust: dict[str, str | None] | None = None, *, lean: bool = True) -> dict[str, Any]:
    """Both paths' answers on fresh sessions and the audit records each wrote, which must
    be equal. ``adjust`` changes the session's headers (``None`` drops one); a ``$path``
    in the body becomes the path's name, so calls that leave state (a pending approval) do
    not meet each other's. ``lean``: whether the lean path must answer the request itself
    (else it must leave it to the SDK: a request it does not take)."""
    server, endpoint = srv
    answers, records = [], []
    for on in (True, False):
        endpoint.fast_path = on
        side = "lean" if on else "sdk"
        try:
            headers = _open(server, who)
            for k, v in (adjust or {}).items():
                headers.pop(k, None)
                if v is not None:
                    headers[k] = v
            sent = as_sent(body, side)
            before, since = len(ANSWERED), mark(server.gw)
            answers.append(_send(server, sent, headers))
        finally:
            endpoint.fast_path = True
        records.append(written(server.gw, since, side, sent))
        check_took(before, side, lean=lean, on=on)
    for answer in answers:
        answer.pop("framing")
    return same(answers, records)


def _call(name: Any, arguments: Any = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CASES: dict[str, tuple[str, Any]] = {
    "list": ("bot", LIST),
    "list for a narrower agent": ("reader", LIST),
    "list with empty params": ("bot", {**LIST, "params": {}}),
    "list with a string id": ("bot", {**LIST, "id": "req-1"}),
    "list with a huge id": ("bot", {**LIST, "id": 2**62}),
    "list with a cursor": ("bot", {**LIST, "params": {"cursor": "x"}}),
    "list with params not an object": ("bot", {**LIST, "params": [1]}),
    "a notification": ("bot", {"jsonrpc": "2.0", "method": "tools/list"}),
    "call": ("bot", _call("add", {"a": 2, "b": 3})),
    "call with no arguments": ("bot", _call("add")),
    "call with bad arguments": ("bot", _call("add", {"a": "two"})),
    "call with arguments not an object": ("bot", _call("add", [1, 2])),
    "call with a name not a string": ("bot", _call(5, {"a": 1})),
    "call without a name": ("bot", {**_call("add"), "params": {}}),
    "call of an unknown tool": ("bot", _call("nope", {})),
    "call of a tool not in the profile": ("reader", _call("pay", {"invoice": "i",
                                                                  "amount": 1})),
    "call needing an approver": ("intern", _call("pay", {"invoice": "$path", "amount": 1})),
    "call needing confirmation": ("sup", _call("pay", {"invoice": "$path", "amount": 1})),
    "call of an action tool": ("bot", _call("bank_hold", {"invoice": "i", "amount": 1})),
    "call with an unknown param": ("bot", _call("add", {"a": 1, "b": 1}, extra=1)),
    "call with a progress token": ("bot", _call("add", {"a": 1, "b": 1}, _meta={
        "progressToken": "p"})),
    "wrong jsonrpc version": ("bot", {**_call("add", {"a": 1, "b": 1}), "jsonrpc": "1.0"}),
    "an unknown method": ("bot", {**LIST, "method": "tools/lists"}),
    "a batch": ("bot", [LIST]),
    "a boolean id": ("bot", {**LIST, "id": True}),
    "an extra member": ("bot", {**LIST, "extra": 1}),
    "malformed JSON": ("bot", b'{"jsonrpc": "2.0", "id": 1, "method": '),
}


SDK_ONLY = {
    "list with a cursor": NEEDS_SDK + " (pagination)",
    "list with params not an object": SDK_REFUSES,
    "a notification": NEEDS_SDK + " (no id: 202, nothing answered)",
    "call with arguments not an object": SDK_REFUSES,
    "call with a name not a string": SDK_REFUSES,
    "call without a name": SDK_REFUSES,
    "call with an unknown param": NEEDS_SDK + " (a param it may read)",
    "call with a progress token": NEEDS_SDK + " (progress notifications)",
    "wrong jsonrpc version": SDK_REFUSES,
    "an unknown method": SDK_REFUSES,
    "a batch": SDK_REFUSES,
    "a boolean id": SDK_REFUSES,
    "an extra member": SDK_REFUSES,
    "malformed JSON": SDK_REFUSES,
}
"""The cases the lean path leaves to the SDK by design (:func:`lean.plan_in_session` is
``None``): for them the differential checks the hand-over and that the lean path did not
answer; every other case, refused and gated calls included, must be answered by the lean
path."""


@pytest.mark.parametrize("case", list(CASES))
def test_the_lean_path_answers_on_a_session_as_the_sdk_does(
        srv: tuple[McpServer, Any], case: str) -> None:
    who, body = CASES[case]
    _same(srv, who, body, lean=case not in SDK_ONLY)


@pytest.mark.parametrize("adjust", [
    {"Accept": "application/json"},
    {"Accept": "text/event-stream"},
    {"Accept": "*/*"},
    {"Content-Type": "text/plain"},
    {"Content-Type": "application/json; charset=utf-8"},
    {"MCP-Protocol-Version": "2025-06-18"},
    {"MCP-Protocol-Version": "2026-07-28"},
    {"MCP-Protocol-Version": None},
    {"Mcp-Session-Id": "tk1.forged.id"},
    {"Mcp-Method": "tools/list"},
    {"Host": "evil.example"},
], ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()))
def test_unusual_headers_get_the_same_answer(srv: tuple[McpServer, Any],
                                             adjust: dict[str, str | None]) -> None:
    # the lean path takes only an Accept and a Content-Type the SDK reads the same way;
    # any other change (the session's version or id, routing headers, a foreign Host) is
    # the SDK's to answer
    taken = adjust in ({"Accept": "*/*"}, {"Content-Type": "application/json; charset=utf-8"})
    _same(srv, "bot", LIST, adjust, lean=taken)
    _same(srv, "bot", _call("add", {"a": 1, "b": 2}), adjust, lean=taken)


def test_another_agents_token_on_a_session_gets_the_same_answer(
        srv: tuple[McpServer, Any]) -> None:
    server, _ = srv
    _same(srv, "bot", LIST, {"Authorization": f"Bearer {server.tokens['reader']}"},
          lean=False)  # not the session's owner: the SDK refuses it


def test_a_cancelled_call_ends_as_the_sdk_ends_it(srv: tuple[McpServer, Any]) -> None:
    """``notifications/cancelled`` for a running call: the notification is accepted and
    the call's stream ends at once with no answer, on both paths."""
    server, endpoint = srv
    seen = []
    for on in (True, False):
        endpoint.fast_path = on
        headers = _open(server, "bot")
        got: dict[str, Any] = {}

        def calling(headers: dict[str, str] = headers, got: dict[str, Any] = got) -> None:
            got["answer"] = _send(server, _call("nap", {"seconds": 8}), headers)
        started = time.monotonic()
        caller = threading.Thread(target=calling)
        caller.start()
        time.sleep(0.5)
        note = httpx.post(server.url, headers=headers, timeout=10, json={
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "no longer needed"}})
        caller.join(10)
        assert time.monotonic() - started < 5, "the cancelled call ran on"
        seen.append((note.status_code, got["answer"]))
    endpoint.fast_path = True
    assert seen[0] == seen[1]
    assert seen[0][0] == 202 and seen[0][1]["body"] == [{"event": "message", "data": {
        "jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}}]


@pytest.fixture
def lean_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session ids the lean path answered on, in order."""
    seen: list[str] = []
    real = lean.send_event

    async def spy(send: Any, sid: str, answering: Any, *args: Any) -> None:
        seen.append(sid)
        await real(send, sid, answering, *args)
    monkeypatch.setattr(lean, "send_event", spy)
    return seen


def test_plain_requests_on_a_served_session_take_the_lean_path(
        srv: tuple[McpServer, Any], lean_answers: list[str]) -> None:
    server, _ = srv
    headers = _open(server, "bot", served=False)
    sid = headers["Mcp-Session-Id"]
    first = _send(server, _call("add", {"a": 2, "b": 3}), headers)  # sets up delivery: SDK
    assert lean_answers == []
    second = _send(server, _call("add", {"a": 2, "b": 3}), headers)
    listed = _send(server, LIST, headers)
    assert lean_answers == [sid, sid]
    # the SDK streams its answer; the lean path sends one JSON body, which the client
    # reads to its end (so its connection is reused)
    assert (first.pop("framing"), second.pop("framing"), listed["framing"]) == (
        "text/event-stream", "application/json", "application/json")
    assert first == second and first["status"] == 200
    assert first["body"][0]["data"]["result"]["structuredContent"] == {"result": 5}
    assert [t["name"] for t in listed["body"][0]["data"]["result"]["tools"]][:1] == ["add"]


def test_a_client_that_can_elicit_is_left_to_the_sdk(
        srv: tuple[McpServer, Any], lean_answers: list[str]) -> None:
    server, _ = srv
    headers = _open(server, "bot", {"elicitation": {}})
    answer = _send(server, _call("add", {"a": 2, "b": 3}), headers)
    assert answer["body"][0]["data"]["result"]["isError"] is False
    assert lean_answers == []


def test_an_ended_session_is_not_served_by_the_lean_path(
        srv: tuple[McpServer, Any], lean_answers: list[str]) -> None:
    server, _ = srv
    headers = _open(server, "bot")
    assert httpx.delete(server.url, headers=headers, timeout=10).status_code == 200
    answer = _send(server, LIST, headers)
    assert answer["status"] == 404 and lean_answers == []


def test_the_sdk_client_of_the_2025_era_works_through_the_lean_path(
        srv: tuple[McpServer, Any], lean_answers: list[str]) -> None:
    server, _ = srv

    async def session() -> None:
        async with connect(server, "bot", "legacy") as client:
            assert [t.name for t in (await client.list_tools()).tools][:1] == ["add"]
            for b in range(3):
                res = await client.call_tool("add", {"a": 1, "b": b})
                assert res.structured_content == {"result": 1 + b}
            denied = await client.call_tool("add", {"a": "x"})
            assert denied.is_error and "invalid_arguments" in denied.content[0].text
    anyio.run(session)
    assert len(lean_answers) == 4  # the list set up delivery; the calls were lean


# -- the differential catches a broken lean path ------------------------------------------


def test_a_lean_path_answering_another_reply_is_caught(
        srv: tuple[McpServer, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    async def change(counting: Any, face: Any, who: Any, job: Any) -> Any:
        status, reply = await counting(face, who, job)
        return status, {**reply, "id": 8}
    breaking(monkeypatch, change)
    with pytest.raises(AssertionError, match='"id": 8'):
        _same(srv, "bot", _call("add", {"a": 2, "b": 3}))


def test_a_lean_path_writing_other_audit_records_is_caught(
        srv: tuple[McpServer, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # the lean path gives the pipeline a call with a task id of its own: the answers are
    # still the same, only the audit records show it
    breaking(monkeypatch, own_task_id)
    with pytest.raises(AssertionError, match="audit records differ"):
        _same(srv, "sup", _call("pay", {"invoice": "$path", "amount": 1}))


def test_a_lean_path_that_answers_nothing_itself_is_caught(
        srv: tuple[McpServer, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # leaving everything to the SDK would make the differential compare the SDK with
    # itself: the count of what the lean path answered shows it
    monkeypatch.setattr(lean, "plan_in_session", lambda *args: None)
    with pytest.raises(AssertionError, match="the lean path answered nothing"):
        _same(srv, "bot", _call("add", {"a": 2, "b": 3}))


# -- the answer itself (JSON, or SSE for a long call) -----------------------------------


def _sent() -> tuple[list[dict[str, Any]], Any]:
    out: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        out.append(message)
    return out, send


async def _slow(seconds: float) -> tuple[int, dict[str, Any]]:
    await asyncio.sleep(seconds)
    return 200, {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_a_quick_answer_is_one_json_body() -> None:
    out, send = _sent()
    asyncio.run(lean.send_event(send, "sid-1", _slow(0), {}, 1))
    body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert out[0]["status"] == 200 and dict(out[0]["headers"]) == {
        b"content-length": str(len(body)).encode(), b"content-type": b"application/json",
        b"mcp-session-id": b"sid-1"}
    assert [m["body"] for m in out[1:]] == [body] and not out[1].get("more_body")


def test_a_slow_answer_is_the_sdks_sse_kept_alive_with_comments(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean, "PING_INTERVAL_S", 0.05)
    out, send = _sent()
    asyncio.run(lean.send_event(send, "sid-1", _slow(0.28), {}, 1))
    assert out[0]["status"] == 200 and dict(out[0]["headers"]) == {
        b"cache-control": b"no-cache, no-transform", b"connection": b"keep-alive",
        b"content-type": b"text/event-stream", b"mcp-session-id": b"sid-1",
        b"x-accel-buffering": b"no"}
    pings = [m for m in out[1:-1] if m["body"].startswith(b": ping - ")]
    assert len(pings) == len(out) - 2 >= 3
    assert all(m["more_body"] and m["body"].endswith(b"\r\n\r\n") for m in pings)
    assert out[-1]["body"] == (
        b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n')
    assert not out[-1].get("more_body")


def test_cancelling_the_response_cancels_the_answer() -> None:
    out, send = _sent()
    inner: list[asyncio.Task[Any]] = []

    async def answering() -> tuple[int, dict[str, Any]]:
        current = asyncio.current_task()
        assert current is not None
        inner.append(current)
        await asyncio.sleep(30)
        return 200, {}

    async def main() -> None:
        running: dict[Any, Any] = {}
        outer = asyncio.ensure_future(lean.send_event(send, "sid-1", answering(), running, 1))
        await asyncio.sleep(0.05)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        await asyncio.sleep(0)
        assert inner[0].cancelled() and running == {}
    asyncio.run(main())
    assert out == []


def test_a_cancellation_is_answered_request_cancelled() -> None:
    out, send = _sent()

    async def main() -> None:
        running: dict[Any, Any] = {}
        outer = asyncio.ensure_future(lean.send_event(send, "sid-1", _slow(30), running, 7))
        await asyncio.sleep(0.05)
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "no longer needed"}}
        lean.cancel(running, "sid-2", note)  # another session's
        lean.cancel(running, "sid-1", {**note, "params": {"requestId": 8}})
        lean.cancel(running, "sid-1", {**note, "id": 3})  # a request, not a notification
        assert not outer.done()
        lean.cancel(running, "sid-1", note)
        await asyncio.wait_for(outer, 5)
        assert running == {}
    asyncio.run(main())
    assert [m["type"] for m in out] == ["http.response.start", "http.response.body"]
    assert out[1]["body"] == (b'event: message\r\ndata: {"jsonrpc":"2.0","id":7,"error":'
                              b'{"code":-32800,"message":"Request cancelled"}}\r\n\r\n')


def test_a_served_request_holds_an_idle_session() -> None:
    from toolkeeper.mcp.get_stream import in_flight as _in_flight

    async def main() -> None:
        class Transport:
            idle_scope = anyio.CancelScope(deadline=anyio.current_time() + 100)
            _idle_timeout = 60.0
            _requests_in_flight = 0
        t = Transport()
        with _in_flight(t):
            with _in_flight(t):
                assert t.idle_scope.deadline == float("inf") and t._requests_in_flight == 2
            assert t.idle_scope.deadline == float("inf")
        assert t._requests_in_flight == 0
        assert 59 < t.idle_scope.deadline - anyio.current_time() <= 60
    anyio.run(main)
