"""2025-11-25 sessions served by any worker or replica: ids sealed with the shared state
key, adopted by a process that did not open them; forged or altered ids refused (404)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from mcp.client.streamable_http import streamable_http_client
from mcp_fixtures import build_gateway

from mcp import Client
from tests.support.waiting import wait_until
from toolkeeper import Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.server import mcp_hosts

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "probe", "version": "1"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ACCEPT = "application/json, text/event-stream"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RoundRobin:
    """A loopback TCP proxy: each new connection goes to the next backend in turn."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.hits = [0] * len(ports)
        self.port = _free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        turn = sum(self.hits) % len(self.ports)
        self.hits[turn] += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.ports[turn])
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", self.port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    def __enter__(self) -> RoundRobin:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextmanager
def _replica(gw: Gateway) -> Iterator[int]:
    port = _free_port()
    app = create_app(gw, ApiSettings(mcp_allowed_hosts=mcp_hosts("127.0.0.1")))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: bool(server.started), timeout=20, what="replica started")
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def _two_replicas(url: str) -> Iterator[tuple[str, dict[str, str], list[int]]]:
    """Two gateways (replicas) over one store behind a round-robin proxy."""
    first, tokens = build_gateway(url)
    second = Gateway.open(url)
    try:
        with _replica(first) as a, _replica(second) as b, RoundRobin([a, b]) as proxy:
            yield f"http://127.0.0.1:{proxy.port}/mcp", tokens, [a, b]
    finally:
        second.close()
        first.close()


async def _session_work(url: str, token: str, rounds: int, tool: str,
                        arguments: dict[str, Any], mode: str = "legacy") -> list[str]:
    """The official SDK client in 2025-11-25 mode (``auto``: 2026-07-28, stateless), a new
    connection per request."""
    texts: list[str] = []
    async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(20.0),
            limits=httpx2.Limits(max_keepalive_connections=0)) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode,
                   read_timeout_seconds=20) as client:
        assert (client.protocol_version == "2025-11-25") == (mode == "legacy")
        for _ in range(rounds):
            listed = await client.list_tools()
            assert tool in {t.name for t in listed.tools}
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result
            texts.append(str(result.content[0].text))  # type: ignore[union-attr]
    return texts


def test_a_session_is_served_by_both_replicas(db_url: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolkeeper.mcp")
    with _two_replicas(db_url) as (url, tokens, _ports):
        texts = anyio.run(_session_work, url, tokens["bot"], 6, "add", {"a": 2, "b": 3})
    assert texts == ["5"] * 6
    messages = [r.getMessage() for r in caplog.records if r.name == "toolkeeper.mcp"]
    assert any("opened by pid" in m for m in messages)
    assert any("adopted by pid" in m for m in messages)  # the other replica served it


def _post(url: str, token: str, body: Any, session: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT,
               "MCP-Protocol-Version": "2025-11-25"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return httpx.post(url, json=body, headers=headers, timeout=10)


def test_forged_or_borrowed_session_ids_are_refused(tmp_path: Path) -> None:
    with _two_replicas(f"sqlite:///{tmp_path}/s.db") as (url, tokens, ports):
        opened = _post(url, tokens["bot"], INIT)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        assert sid.startswith("tk1.")
        _post(url, tokens["bot"], {"jsonrpc": "2.0", "method": "notifications/initialized"},
              sid)
        for port in ports:  # the genuine id works on each replica
            direct = f"http://127.0.0.1:{port}/mcp"
            ok = _post(direct, tokens["bot"], LIST, sid)
            assert ok.status_code == 200 and "add" in ok.text, ok.text
        payload, mac = sid[4:].split(".")
        flipped = payload[:-1] + ("A" if payload[-1] != "A" else "B")
        forged = [f"tk1.{flipped}.{mac}", f"tk1.{payload}.{mac[:-1]}x", "tk1.e30.AAAA",
                  "0123456789abcdef0123456789abcdef", "tk1." + "A" * 9000]
        for port in ports:
            direct = f"http://127.0.0.1:{port}/mcp"
            for bad in forged:
                res = _post(direct, tokens["bot"], LIST, bad)
                assert res.status_code == 404, (bad[:40], res.status_code, res.text)
            # another agent's credential with a genuine id: as if the session did not exist
            res = _post(direct, tokens["reader"], LIST, sid)
            assert res.status_code == 404, res.text
        # ended by the client (DELETE): that process does not take the id up again
        direct = f"http://127.0.0.1:{ports[0]}/mcp"
        ended = httpx.delete(direct, headers={"Authorization": f"Bearer {tokens['bot']}",
                                              "Mcp-Session-Id": sid,
                                              "MCP-Protocol-Version": "2025-11-25"}, timeout=10)
        assert ended.status_code == 200, ended.text
        assert _post(direct, tokens["bot"], LIST, sid).status_code == 404


async def _sessions_at_once(url: str, token: str, n: int = 3) -> list[list[str]]:
    """``n`` sessions at once, so that a busy worker leaves connections to the other."""
    done: list[list[str]] = []

    async def one() -> None:
        done.append(await _session_work(url, token, 8, "lookup_invoice",
                                        {"invoice_id": "INV-1001"}))
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    assert len(done) == n
    return done


def _token_from_output(proc: subprocess.Popen[bytes], title: str) -> tuple[str, str]:
    """The token printed after ``title``, and everything read up to it."""
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        seen += line
        if title in line:
            return line.rsplit(":", 1)[1].strip(), seen
    raise AssertionError(f"no {title!r} printed")


def _collect(proc: subprocess.Popen[bytes], lines: list[str]) -> None:
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, b""):
        lines.append(line.decode())


def test_two_workers_serve_one_session(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "TOOLKEEPER_DATABASE_URL": f"sqlite:///{tmp_path}/w.db",
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "toolkeeper.cli", "serve", "--port",
                             str(port), "--workers", "2", "--demo", "--log-level", "info",
                             "--log-format", "json"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def healthy() -> bool:
            assert proc.poll() is None, "serve exited early"
            return httpx.get(base + "/healthz", timeout=1).status_code == 200

        wait_until(healthy, timeout=60, what=f"{base}/healthz answers",
                   ignoring=(httpx.HTTPError,))
        agent, seen = _token_from_output(proc, "demo agent token")
        lines: list[str] = [seen]
        reader = threading.Thread(target=_collect, args=(proc, lines), daemon=True)
        reader.start()
        # which worker accepts a connection is the kernel's choice: sessions, each over
        # many connections, until one worker served a session the other opened (bounded)
        for _ in range(10):
            for texts in anyio.run(_sessions_at_once, base + "/mcp", agent):
                assert len(texts) == 8 and all("INV-1001" in t for t in texts)
            if "adopted by pid" in "".join(lines):
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    reader.join(timeout=10)
    text = "".join(lines)
    opened = set(re.findall(r"opened by pid (\d+)", text))
    adopted = set(re.findall(r"adopted by pid (\d+)", text))
    assert opened and adopted, text[-3000:]
    # both workers answered requests of sessions the other one opened
    assert len(opened | adopted) == 2, (opened, adopted)


@pytest.mark.slow
def test_both_client_eras_and_the_inspector_work_through_a_round_robin_balancer(
        tmp_path: Path) -> None:
    # issue 12 item 2: the official SDK client of each era and the MCP Inspector (a Node
    # client) against two replicas behind a plain per-connection round-robin balancer
    from peers import entry, node

    with _two_replicas(f"sqlite:///{tmp_path}/rr.db") as (url, tokens, _ports):
        assert anyio.run(_session_work, url, tokens["bot"], 3, "add", {"a": 2, "b": 3}) \
            == ["5"] * 3
        assert anyio.run(_session_work, url, tokens["bot"], 4, "add", {"a": 2, "b": 3},
                         "auto") == ["5"] * 4
        for era in ("legacy", "modern"):
            for method in (["--method", "tools/list"],
                           ["--method", "tools/call", "--tool-name", "add",
                            "--tool-args-json", '{"a": 40, "b": 2}']):
                done = subprocess.run(
                    [node(), entry("inspector"), "--cli", url, "--transport", "http",
                     "--header", f"Authorization: Bearer {tokens['bot']}", "--format",
                     "json", "--protocol-era", era, *method],
                    capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                    env={**os.environ, "HOME": str(tmp_path)})
                assert done.returncode == 0, (era, method, done.stderr[-2000:])
                result = json.loads(done.stdout)["result"]
                if method[1] == "tools/call":
                    assert result["structuredContent"] == {"result": 42}
                else:
                    assert "add" in {t["name"] for t in result["tools"]}
