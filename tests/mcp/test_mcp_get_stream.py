"""Many idle clients (issue 32 part 5): a 2025-11-25 session's standalone GET stream is held
by its request's own task (``toolkeeper.mcp.get_stream``), with what the SDK's stream
does: keep-alive comments, the session's notifications, one stream at a time (409), a
client that leaves frees it, a DELETE ends it; and the sessions a process holds are kept
out of full collections (``toolkeeper.mcp.session_gc``)."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp_fixtures import McpServer, serving_endpoint

from toolkeeper import Activation, Profile
from toolkeeper.mcp import get_stream, session_gc

BOUND_S = 10.0
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-11-25"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "idle", "version": "0"}}}


@pytest.fixture
def served(tmp_path: Any) -> Iterator[tuple[McpServer, Any]]:
    with serving_endpoint(f"sqlite:///{tmp_path}/tk.db") as (srv, endpoint):
        yield srv, endpoint


def _session(srv: McpServer, who: str = "reader") -> dict[str, str]:
    """A new initialized session's headers (its id, the agent's token)."""
    auth = {**HEADERS, "Authorization": f"Bearer {srv.tokens[who]}"}
    opened = httpx.post(srv.url, headers=auth, json=INIT, timeout=BOUND_S)
    assert opened.status_code == 200, opened.text
    headers = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    ack = httpx.post(srv.url, headers=headers, timeout=BOUND_S,
                     json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert ack.status_code == 202
    return headers


def _get(client: httpx.Client, srv: McpServer, headers: dict[str, str]) -> Any:
    return client.stream("GET", srv.url, headers={**headers, "Accept": "text/event-stream"})


def _on_loop(endpoint: Any, fn: Any) -> Any:
    """``fn()`` run on the server's event loop (its answer)."""
    loop = endpoint.face.notifier._loop

    async def run() -> Any:
        return fn()
    return asyncio.run_coroutine_threadsafe(run(), loop).result(BOUND_S)


def _until(what: str, check: Any) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"not within {BOUND_S} s: {what}"
        time.sleep(0.02)


def test_a_standalone_stream_costs_its_request_task_alone(
        served: tuple[McpServer, Any]) -> None:
    srv, endpoint = served
    first, headers = _session(srv), _session(srv)
    with httpx.Client(timeout=BOUND_S) as client, _get(client, srv, first):
        _until("the first stream is held", lambda: endpoint.get_streams.open() == 1)
        tasks = len(_on_loop(endpoint, asyncio.all_tasks))  # the process's watchers too
        with _get(client, srv, headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"] == "text/event-stream"
            assert stream.headers["mcp-session-id"] == headers["Mcp-Session-Id"]
            _until("the stream is held", lambda: endpoint.get_streams.open() == 2)
            # the SDK's (sse-starlette) holds six: the request's, five in a task group
            assert len(_on_loop(endpoint, asyncio.all_tasks)) == tasks + 1


def test_the_stream_keeps_alive_carries_notifications_and_ends_on_delete(
        served: tuple[McpServer, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    srv, endpoint = served
    monkeypatch.setattr(get_stream, "PING_INTERVAL_S", 0.2)
    headers = _session(srv)
    listed = httpx.post(srv.url, headers=headers, timeout=BOUND_S,
                        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert listed.status_code == 200 and '"add"' in listed.text
    with httpx.Client(timeout=BOUND_S) as client, _get(client, srv, headers) as stream:
        chunks = stream.iter_raw()
        assert next(chunks).startswith(b": ping - ")
        srv.gw.registry.put_profile(Profile(name="reading", autonomy=3, activations=(
            Activation(tool="add"), Activation(tool="pay"))), replace=True)
        seen, deadline = b"", time.monotonic() + BOUND_S
        while b"notifications/tools/list_changed" not in seen:  # keep-alives come between
            assert time.monotonic() < deadline, seen[-300:]
            seen += next(chunks)
        event = seen[seen.index(b"event: message"):]
        assert event.startswith(b"event: message\r\ndata: {") and event.endswith(b"}\r\n\r\n")
        monkeypatch.setattr(get_stream, "PING_INTERVAL_S", 60.0)
        while not next(chunks).startswith(b": ping - "):  # the stream now waits 60 s:
            assert time.monotonic() < deadline  # only the DELETE can end it in time
        assert httpx.delete(srv.url, headers=headers, timeout=BOUND_S).status_code == 200
        deadline = time.monotonic() + BOUND_S
        for _ in chunks:  # the response ends (a keep-alive may come first)
            assert time.monotonic() < deadline, "the stream did not end on DELETE"
    assert endpoint.get_streams.open() == 0


def test_one_stream_at_a_time_and_a_client_that_leaves_frees_it(
        served: tuple[McpServer, Any]) -> None:
    srv, endpoint = served
    headers = _session(srv)
    with httpx.Client(timeout=BOUND_S) as client:
        with _get(client, srv, headers) as first:
            assert first.status_code == 200
            _until("the stream is held", lambda: endpoint.get_streams.open() == 1)
            with _get(client, srv, headers) as second:
                assert second.status_code == 409  # the SDK's answer, unchanged
        _until("the server saw the client leave", lambda: endpoint.get_streams.open() == 0)
        with _get(client, srv, headers) as again:
            assert again.status_code == 200


@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_sessions_opened_are_frozen_and_ended_ones_thawed(thawed: None) -> None:
    keeper = session_gc.SessionGc(every=3)
    held = [Cycle() for _ in range(10)]
    for _ in range(2):
        keeper.opened()
    assert gc.is_tracked(held[0]) and gc.get_freeze_count() == 0
    keeper.opened()
    frozen = gc.get_freeze_count()
    walked = {id(o) for o in gc.get_objects()}
    assert frozen > len(held) and not walked & {id(o) for o in held}
    ended = weakref.ref(held[0])
    del held  # cycles that ended while frozen: the collector cannot free them…
    for _ in range(2):
        keeper.ended(still_open=4)
    gc.collect()
    assert ended() is not None
    keeper.ended(still_open=4)  # …until a quarter of the open ones (at least `every`) ended
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert ended() is None


def test_no_freeze_after_a_thaw_before_a_full_collection(thawed: None) -> None:
    keeper = session_gc.SessionGc(every=1)
    keeper.opened()
    keeper.ended(still_open=0)
    assert gc.get_freeze_count() == 0
    gc.disable()  # no full collection but ours
    try:
        keeper.opened()
        assert gc.get_freeze_count() == 0  # what ended would be frozen again
        gc.collect()
        keeper.opened()
        assert gc.get_freeze_count() > 0
    finally:
        gc.enable()


def test_the_server_freezes_as_sessions_open_and_thaws_as_they_end(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, thawed: None) -> None:
    monkeypatch.setattr(session_gc, "FREEZE_EVERY", 2)
    with serving_endpoint(f"sqlite:///{tmp_path}/tk.db") as (srv, _endpoint):
        opened = [_session(srv), _session(srv)]
        assert gc.get_freeze_count() > 0
        gc.collect()  # a full collection since, so a later thaw is followed by a freeze
        for headers in opened:
            assert httpx.delete(srv.url, headers=headers, timeout=BOUND_S).status_code == 200
        assert gc.get_freeze_count() == 0
