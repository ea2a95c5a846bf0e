"""The lean upstream client's own HTTP/1.1 client (:mod:`toolkeeper.upstream.rawhttp`)
against real loopback servers started here: raw asyncio servers that answer each request
with scripted bytes (chunked, SSE, ``Connection: close``, slow, garbage, oversized, cut
mid-body) and count the connections they accept, and a TLS one for https. Then the lean
client over it: its error mapping, and its fallback to httpx (a proxy in the environment,
an answer the small client does not read)."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolkeeper.upstream import rawhttp
from toolkeeper.upstream.errors import UpstreamUnavailable
from toolkeeper.upstream.http_client import LeanHttpClient

Reply = Callable[["Req", asyncio.StreamWriter], Awaitable[bool]]
"""Writes the answer to one request; ``False`` ends the connection."""
BOUND_S = 10.0
"""Every wait in these tests, generous against a loaded machine."""


class Req:
    def __init__(self, head: bytes, body: bytes, conn: int) -> None:
        lines = head.decode("latin-1").split("\r\n")
        self.line = lines[0]
        self.headers = {k.strip().lower(): v.strip()
                        for k, _, v in (ln.partition(":") for ln in lines[1:])}
        self.body = body
        self.conn = conn
        """Which accepted connection (0, 1, …) it came on."""

    def json(self) -> Any:
        return orjson.loads(self.body)


class Server:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.accepted = 0
        self.requests: list[Req] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = self.accepted
        self.accepted += 1
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                req = Req(head[:-4], b"", conn)
                req.body = await reader.readexactly(int(req.headers.get("content-length", 0)))
                self.requests.append(req)
                if not await self.reply(req, writer):
                    return
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(reply: Reply, ssl_ctx: ssl.SSLContext | None = None,
                  ) -> AsyncIterator[Server]:
    server = Server(reply)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=ssl_ctx)
    port = srv.sockets[0].getsockname()[1]
    server.url = f"{'https' if ssl_ctx else 'http'}://127.0.0.1:{port}/mcp"
    try:
        yield server
    finally:
        srv.close()
        for writer in server.writers:
            writer.transport.abort()
        await asyncio.wait_for(srv.wait_closed(), BOUND_S)


def answer(status: int, body: bytes, *headers: str, length: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status} X", *headers]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def result_of(req: Req, result: Any = None) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": req.json().get("id"),
                         "result": {"echo": req.json().get("params")} if result is None
                         else result})


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + \
        b"0\r\nX-Trailer: t\r\n\r\n"


def pool(url: str, **kw: Any) -> rawhttp.Pool:
    return rawhttp.Pool(url, headers={"Content-Type": "application/json"},
                        connect_timeout_s=BOUND_S, **kw)


async def post(p: rawhttp.Pool, body: bytes = b"{}", timeout_s: float = BOUND_S,
               ) -> tuple[int, dict[str, str], bytes]:
    resp = await p.request("POST", b"X-Extra: 1\r\n", body, timeout_s)
    return resp.status, resp.headers, await resp.read()


async def assert_protocol_failure(reply: Reply, match: str) -> None:
    """One POST to a server answering with ``reply`` fails with a :class:`ProtocolFailure`
    whose message says ``match``, within the test's bound."""
    async with serving(reply) as srv:
        p = pool(srv.url)
        with pytest.raises(rawhttp.ProtocolFailure, match=match):
            await asyncio.wait_for(post(p), BOUND_S)
        await p.aclose()


# -- the pool -------------------------------------------------------------------------------

async def test_keep_alive_reuses_one_connection_and_reads_headers_case_insensitively(
) -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(answer(200, req.body, "Content-TYPE: application/json", "X-Twice: a",
                       "x-twice: b"))
        return True

    async with serving(reply) as srv:
        p = pool(srv.url)
        for i in range(5):
            status, headers, body = await post(p, b'{"n": %d}' % i)
            assert (status, body) == (200, b'{"n": %d}' % i)
            assert headers["content-type"] == "application/json"
            assert headers["x-twice"] == "a, b"
        assert srv.accepted == 1
        first = srv.requests[0]
        assert first.line == "POST /mcp HTTP/1.1"
        assert first.headers["host"] == srv.url.split("/")[2]
        assert first.headers["x-extra"] == "1"
        assert first.headers["content-length"] == "8"
        await p.aclose()


async def test_concurrent_requests_each_get_their_own_connection() -> None:
    all_in = asyncio.Event()

    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        if len(srv.requests) == 4:
            all_in.set()
        # the first four answer only once all four are in flight at once
        await asyncio.wait_for(all_in.wait(), BOUND_S)
        w.write(answer(200, req.body))
        return True

    async with serving(reply) as srv:
        p = pool(srv.url)
        got = await asyncio.gather(*(post(p, b"%d" % i) for i in range(4)))
        assert [body for _, _, body in got] == [b"0", b"1", b"2", b"3"]
        assert srv.accepted == 4
        await asyncio.gather(*(post(p) for _ in range(4)))  # all four idle ones reused
        assert srv.accepted == 4
        await p.aclose()


async def test_the_pool_is_bounded_and_waits_for_a_free_connection() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        w.write(answer(200, b"ok"))
        return True

    async with serving(reply) as srv:
        p = pool(srv.url, max_connections=2, max_idle=2)
        got = await asyncio.gather(*(post(p) for _ in range(6)))
        assert [g[2] for g in got] == [b"ok"] * 6
        assert srv.accepted == 2
        await p.aclose()


async def test_chunked_bodies_with_extensions_and_trailers_arriving_in_pieces() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        data = answer(200, chunked(b"hello ", b"chunked ", b"world"),
                      "Transfer-Encoding: chunked", length=False)
        for i in range(0, len(data), 7):  # in small writes, as a slow server would
            w.write(data[i:i + 7])
            await w.drain()
            await asyncio.sleep(0)
        return True

    async with serving(reply) as srv:
        p = pool(srv.url)
        for _ in range(3):
            assert (await post(p))[2] == b"hello chunked world"
        assert srv.accepted == 1  # read to the end: reused
        await p.aclose()


@pytest.mark.parametrize("how", ["read-to-close", "connection-close", "http/1.0"])
async def test_a_connection_the_server_ends_is_never_reused(how: str) -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        if how == "read-to-close":
            w.write(answer(200, b"until the end", length=False))
            return False
        if how == "connection-close":
            w.write(answer(200, b"closing", "Connection: close"))
        else:
            w.write(answer(200, b"old").replace(b"HTTP/1.1", b"HTTP/1.0", 1))
        return True  # keeps it open: the client must still not send on it again

    async with serving(reply) as srv:
        p = pool(srv.url)
        bodies = [(await post(p))[2] for _ in range(3)]
        assert len(set(bodies)) == 1 and bodies[0]
        assert srv.accepted == 3
        assert [r.conn for r in srv.requests] == [0, 1, 2]
        await p.aclose()


async def test_an_idle_connection_the_server_closed_is_not_used() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(answer(200, b"once"))
        await w.drain()
        return False  # keep-alive over: closed after the answer, without saying so

    async with serving(reply) as srv:
        p = pool(srv.url)
        for _ in range(3):
            assert (await post(p))[2] == b"once"
            await asyncio.sleep(0.05)
        assert srv.accepted == 3
        await p.aclose()


async def test_interim_answers_are_skipped_but_101_is_refused() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        if req.body == b"101":
            w.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n")
            return True
        w.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                + answer(200, b"final"))
        return True

    async with serving(reply) as srv:
        p = pool(srv.url)
        assert (await post(p))[2] == b"final"
        with pytest.raises(rawhttp.ProtocolFailure, match="101"):
            await post(p, b"101")
        await p.aclose()


async def test_a_silent_server_times_out_and_the_connection_is_dropped() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        if req.body == b"slow":
            await asyncio.sleep(BOUND_S)
        w.write(answer(200, b"fast"))
        return True

    async with serving(reply) as srv:
        p = pool(srv.url)
        start = asyncio.get_running_loop().time()
        with pytest.raises(rawhttp.ReadTimeout):
            await post(p, b"slow", timeout_s=0.3)
        assert asyncio.get_running_loop().time() - start < BOUND_S / 2
        assert (await post(p))[2] == b"fast"
        assert srv.accepted == 2  # the timed-out one was not reused
        await p.aclose()


@pytest.mark.parametrize("garbage", [
    b"NOT HTTP AT ALL\r\n\r\n",
    b"HTTP/1.1 2xx OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
], ids=["not-http", "bad-status", "bad-header", "two-lengths", "negative-length",
        "bad-chunk-size", "bad-chunk-end"])
async def test_garbage_is_a_protocol_failure_and_closes_the_connection(
        garbage: bytes) -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(garbage if req.body == b"bad" else answer(200, b"good"))
        return True

    async with serving(reply) as srv:
        p = pool(srv.url)
        with pytest.raises(rawhttp.ProtocolFailure) as caught:
            await post(p, b"bad")
        assert not isinstance(caught.value, rawhttp.Unsupported)
        assert (await post(p))[2] == b"good"
        assert srv.requests[-1].conn == 1
        await p.aclose()


@pytest.mark.parametrize("what", ["headers", "content-length", "chunked-stream"])
async def test_oversized_answers_are_refused_without_reading_them_all(what: str) -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        if what == "headers":
            w.write(b"HTTP/1.1 200 OK\r\n")
            for i in range(2000):  # ~100 KiB of headers, never ending
                w.write(b"X-Filler-%d: %s\r\n" % (i, b"y" * 40))
                await w.drain()
        elif what == "content-length":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                    % (rawhttp.MAX_BODY_BYTES + 1))
        else:
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            piece = b"%x\r\n%s\r\n" % (1 << 20, b"z" * (1 << 20))
            for _ in range(rawhttp.MAX_BODY_BYTES // (1 << 20) + 4):
                w.write(piece)
                await w.drain()
        await asyncio.sleep(BOUND_S)
        return False

    await assert_protocol_failure(reply, "exceed")


async def test_a_connection_cut_mid_body_is_a_protocol_failure() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
        return False

    await assert_protocol_failure(reply, "closed")


async def test_nobody_listening_is_a_connect_failure() -> None:
    async with serving(lambda req, w: asyncio.sleep(0, False)) as srv:
        url = srv.url
    p = pool(url)
    with pytest.raises(rawhttp.ConnectFailed):
        await post(p)
    await p.aclose()


async def test_what_it_does_not_read_is_unsupported() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        if req.body == b"gzip":
            w.write(answer(200, gzip.compress(b"{}"), "Content-Encoding: gzip"))
        elif req.body == b"fold":
            w.write(b"HTTP/1.1 200 OK\r\nX-A: one\r\n  two\r\nContent-Length: 0\r\n\r\n")
        else:
            w.write(b"HTTP/1.1 200 OK\nContent-Length: 0\n\n")
        return True

    async with serving(reply) as srv:
        p = pool(srv.url)
        for body in (b"gzip", b"fold", b"bare-lf"):
            with pytest.raises(rawhttp.Unsupported) as caught:
                await post(p, body)
            assert caught.value.sent
        await p.aclose()
    with pytest.raises(rawhttp.Unsupported):
        pool("ftp://example.com/mcp")
    with pytest.raises(rawhttp.Unsupported):
        rawhttp.encode_headers({"X-Evil": "a\r\nInjected: 1"})


# -- https ----------------------------------------------------------------------------------

def _certificate(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


async def test_https_verifies_the_certificate_and_sends_sni(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert_file, key_file = _certificate(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert_file, key_file)
    server_ctx.set_alpn_protocols(["http/1.1"])
    names: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: names.append(name)

    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(answer(200, result_of(req), "Content-Type: application/json"))
        return True

    async with serving(reply, server_ctx) as srv:
        url = srv.url.replace("127.0.0.1", "localhost")
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        untrusting = LeanHttpClient(url, headers={}, timeout_s=BOUND_S, connect_timeout_s=BOUND_S)
        assert untrusting.transport == "raw"
        with pytest.raises(UpstreamUnavailable, match="certificate"):
            await untrusting.request("tools/list", {})
        await untrusting.aclose()

        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))  # trusted as httpx trusts it
        client = LeanHttpClient(url, headers={}, timeout_s=BOUND_S, connect_timeout_s=BOUND_S)
        assert client.transport == "raw"
        for _ in range(3):
            assert await client.request("tools/list", {"a": 1}) == {"echo": {"a": 1}}
        assert srv.accepted == 1  # (the refused handshake never got this far)
        assert names[-1] == "localhost"
        await client.aclose()


# -- the lean client over it ----------------------------------------------------------------

def mcp_reply(**special: Callable[[Req, asyncio.StreamWriter], Awaitable[bool]]) -> Reply:
    """A tiny 2026-07-28 server: discover, then ``tools/call`` echoes its arguments (or the
    reply named by the arguments' ``how``)."""

    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        msg = req.json()
        if msg.get("method") == "server/discover":
            w.write(answer(200, result_of(req, {"supportedVersions": ["2026-07-28"]}),
                           "Content-Type: application/json"))
            return True
        how = ((msg.get("params") or {}).get("arguments") or {}).get("how", "")
        if how in special:
            return await special[how](req, w)
        w.write(answer(200, result_of(req, {"content": [], "args": msg["params"]}),
                       "Content-Type: application/json"))
        return True

    return reply


def sse(*events: bytes) -> bytes:
    return b"".join(b"event: message\r\ndata: %s\r\n\r\n" % e for e in events)


async def test_sse_answers_are_read_until_our_response_then_drained_for_reuse() -> None:
    async def stream(req: Req, w: asyncio.StreamWriter) -> bool:
        rid = req.json()["id"]
        note = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                             "params": {"level": "info", "data": "working"}})
        other = orjson.dumps({"jsonrpc": "2.0", "id": rid + 1000, "result": {"no": 1}})
        mine = result_of(req, {"content": [{"type": "text", "text": "done"}]})
        w.write(answer(200, b"", "Content-Type: text/event-stream; charset=utf-8",
                       "Transfer-Encoding: chunked", length=False))
        body = sse(note, other) + b"data: " + mine[:10] + b"\r\ndata: " + mine[10:] + \
            b"\n\n"  # one event over two data lines; LF line ends too
        for i in range(0, len(body), 9):
            w.write(b"%x\r\n%s\r\n" % (len(body[i:i + 9]), body[i:i + 9]))
            await w.drain()
        await asyncio.sleep(0.02)
        w.write(b"0\r\n\r\n")
        return True

    async with serving(mcp_reply(sse=stream)) as srv:
        client = LeanHttpClient(srv.url, headers={"Authorization": "Bearer t"},
                                timeout_s=BOUND_S, connect_timeout_s=BOUND_S)
        await client.start()
        for _ in range(3):
            got = await client.call_tool("echo", {"how": "sse"})
            assert got == {"content": [{"type": "text", "text": "done"}]}
            for _ in range(int(BOUND_S / 0.01)):  # the drain gives the connection back
                if client._raw is not None and client._raw._idle:
                    break
                await asyncio.sleep(0.01)
        assert client.transport == "raw"
        assert srv.accepted == 1
        call = srv.requests[-1]
        assert call.headers["mcp-method"] == "tools/call"
        assert call.headers["mcp-name"] == "echo"
        assert call.headers["authorization"] == "Bearer t"
        assert call.headers["user-agent"].startswith("toolkeeper/")
        await client.aclose()


async def test_an_sse_stream_left_open_costs_its_connection_not_the_next_call() -> None:
    async def held(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(answer(200, b"", "Content-Type: text/event-stream",
                       "Transfer-Encoding: chunked", length=False))
        event = sse(result_of(req, {"content": []}))
        w.write(b"%x\r\n%s\r\n" % (len(event), event))
        await w.drain()
        await asyncio.sleep(BOUND_S)  # never ends the stream
        return False

    async with serving(mcp_reply(held=held)) as srv:
        client = LeanHttpClient(srv.url, headers={}, timeout_s=BOUND_S,
                                connect_timeout_s=BOUND_S)
        await client.start()
        assert await client.call_tool("echo", {"how": "held"}) == {"content": []}
        got = await client.call_tool("echo", {"text": "next"})
        assert got["args"]["arguments"] == {"text": "next"}
        assert srv.requests[-1].conn != srv.requests[-2].conn  # not behind the open stream
        await client.aclose()  # cancels the drain: the held connection is closed


async def test_the_lean_client_maps_failures_as_before() -> None:
    from mcp.shared.exceptions import MCPError

    async def slow(req: Req, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(BOUND_S)
        return False

    async def cut(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"jsonrpc\"")
        return False

    async def garbage(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(answer(200, b"\x00not json {{{", "Content-Type: application/json"))
        return True

    async def status(code: int) -> Callable[[Req, asyncio.StreamWriter], Awaitable[bool]]:
        async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
            w.write(answer(code, b"nope"))
            return True
        return reply

    async with serving(mcp_reply(slow=slow, cut=cut, garbage=garbage,
                                 gone=await status(404), refused=await status(400),
                                 broken=await status(500), moved=await status(307),
                                 )) as srv:
        client = LeanHttpClient(srv.url, headers={}, timeout_s=BOUND_S,
                                connect_timeout_s=BOUND_S)
        await client.start()
        expected = {"slow": -32001, "cut": -32000, "garbage": -32000, "gone": -32000,
                    "refused": -32600, "broken": -32000,
                    "moved": -32000}  # httpx did not follow redirects either
        for how, code in expected.items():
            with pytest.raises(MCPError) as caught:
                await client.call_tool("echo", {"how": how},
                                       read_timeout_seconds=0.3 if how == "slow" else BOUND_S)
            assert caught.value.error.code == code, (how, caught.value)
        assert client.transport == "raw"
        await client.aclose()
    client = LeanHttpClient(srv.url, headers={}, timeout_s=1, connect_timeout_s=1)
    with pytest.raises(UpstreamUnavailable, match="cannot connect"):
        await client.call_tool("echo", {})
    await client.aclose()


async def test_a_proxy_in_the_environment_means_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx would go through the proxy but for NO_PROXY: the call works, over httpx
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with serving(mcp_reply()) as srv:
        client = LeanHttpClient(srv.url, headers={}, timeout_s=BOUND_S,
                                connect_timeout_s=BOUND_S)
        assert client.transport == "httpx"
        assert client.fallback_reason is not None and "proxy" in client.fallback_reason
        await client.start()
        got = await client.call_tool("echo", {"text": "via httpx"})
        assert got["args"]["arguments"] == {"text": "via httpx"}
        assert "python-httpx" in srv.requests[-1].headers["user-agent"]
        await client.aclose()


async def test_an_answer_it_does_not_read_switches_to_httpx() -> None:
    from mcp.shared.exceptions import MCPError

    async def gzipped(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(answer(200, gzip.compress(result_of(req, {"content": [], "zipped": True})),
                       "Content-Type: application/json", "Content-Encoding: gzip"))
        return True

    async with serving(mcp_reply(gzip=gzipped)) as srv:
        client = LeanHttpClient(srv.url, headers={}, timeout_s=BOUND_S,
                                connect_timeout_s=BOUND_S)
        await client.start()
        assert client.transport == "raw"
        # sent, and it may have run: not sent twice, answered as a lost connection
        with pytest.raises(MCPError) as caught:
            await client.call_tool("echo", {"how": "gzip"})
        assert caught.value.error.code == -32000
        assert client.transport == "httpx"
        calls = [r for r in srv.requests if r.json().get("method") == "tools/call"]
        assert len(calls) == 1
        assert (await client.call_tool("echo", {"how": "gzip"}))["zipped"] is True  # httpx
        await client.aclose()

    async with serving(mcp_reply()) as srv2:  # in the handshake: sent again over httpx
        async def discover_gzipped(req: Req, w: asyncio.StreamWriter) -> bool:
            w.write(answer(200, gzip.compress(
                result_of(req, {"supportedVersions": ["2026-07-28"]})),
                "Content-Type: application/json", "Content-Encoding: gzip"))
            return True
        srv2.reply = discover_gzipped
        client = LeanHttpClient(srv2.url, headers={}, timeout_s=BOUND_S,
                                connect_timeout_s=BOUND_S)
        await client.start()
        assert client.transport == "httpx"
        assert client.protocol_version == "2026-07-28"
        await client.aclose()


@pytest.mark.parametrize("eol", [b"\r\n", b"\n", b"\r"], ids=["crlf", "lf", "cr"])
def test_the_sse_reader_finds_our_response_however_the_stream_is_cut(eol: bytes) -> None:
    from toolkeeper.upstream.http_client import _Sse

    mine = orjson.dumps({"jsonrpc": "2.0", "id": 7, "result": {"ok": True}})
    other = orjson.dumps({"jsonrpc": "2.0", "id": 8, "result": {"ok": False}})
    assert mine[16:17] == b","  # split between JSON tokens: the data lines join with LF
    stream = eol.join([b"event: message", b"data: " + other, b"", b": ping", b"",
                       b"data: " + mine[:17], b"data:" + mine[17:], b"", b"data: tail"])
    splits = [[stream[:cut], stream[cut:]] for cut in range(len(stream) + 1)]
    splits.append([stream[i:i + 1] for i in range(len(stream))])  # byte by byte
    for cut, pieces in enumerate(splits):
        sse, found = _Sse(7), None
        for piece in pieces:
            found = found or sse.feed(piece)
        assert found == {"jsonrpc": "2.0", "id": 7, "result": {"ok": True}}, (cut, eol)
    sse = _Sse(7)  # no blank line after the last event: the stream's end completes it
    assert sse.feed(b"data: " + mine) is None
    assert sse.end() == orjson.loads(mine)


async def test_endless_interim_answers_are_refused() -> None:
    async def reply(req: Req, w: asyncio.StreamWriter) -> bool:
        for _ in range(100):
            w.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
        return True

    await assert_protocol_failure(reply, "interim")
