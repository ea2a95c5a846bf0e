"""The ``http`` provider (SPEC §2 step 10, §8): secrets resolved only at call time and never
returned, status/transport errors mapped to stable reasons, caps and guard enforced."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.secrets.backends import Backend
from toolkeeper.errors import ConfigError, ToolDenied, ToolError, UpstreamError
from toolkeeper.model.enums import Autonomy
from toolkeeper.providers.base import Provider, ToolContext, ToolPolicy
from toolkeeper.providers.http import HttpProvider
from toolkeeper.secrets import EnvSecretsStore, SecretsStore

SECRET = "tk-live-9f8e7d6c5b4a"


@dataclass
class Upstream:
    base: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            seen = {"method": self.command, "path": url.path, "query": parse_qs(url.query),
                    "headers": dict(self.headers.items()),
                    "body": self.rfile.read(length).decode() if length else None}
            upstream.requests.append(seen)
            if url.path.startswith("/status/"):
                self._reply(int(url.path.rsplit("/", 1)[1]), b'{"error": "nope"}')
            elif url.path == "/big":
                self._reply(200, b"x" * 5000, "text/plain")
            elif url.path == "/text":
                self._reply(200, "héllo".encode(), "text/plain; charset=utf-8")
            elif url.path == "/slow":
                upstream.release.wait(5)
                self._reply(200, b"{}")
            else:
                self._reply(200, json.dumps(seen).encode())

        do_GET = do_POST = do_DELETE = _handle

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """A loopback HTTP server that records what it received and echoes it back."""
    up = Upstream(base="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(up))
    httpd.daemon_threads = True
    up.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield up
    up.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def _ctx(environ: dict[str, str] | None = None, lookups: list[str] | None = None,
         store: SecretsStore | None = None) -> ToolContext:
    if store is None:
        store = EnvSecretsStore(environ if environ is not None else {
            "TOOLKEEPER_SECRET_CRM__TOKEN": SECRET})

    async def get_secret(connector: str | None, key: str) -> str:
        if lookups is not None:
            lookups.append(f"{connector}/{key}")
        return await store.get_secret(connector, key)

    return ToolContext(
        call_id="c1", tenant_id="t1", agent="a1", tool="crm", action="run",
        tool_version="1.0.0", autonomy=Autonomy.GUARDED, granted_scopes=frozenset(),
        policy=ToolPolicy(), _get_secret=get_secret,
    )


def _provider(upstream: Upstream, path: str = "/echo", **config: Any) -> HttpProvider:
    config.setdefault("allowed_networks", ["127.0.0.1/32"])
    config.setdefault("headers", {"Authorization": "Bearer ${secret:crm/token}",
                                  "X-Client": "toolkeeper-tests"})
    return HttpProvider({"url": upstream.base + path, **config})


async def test_provider_satisfies_the_provider_protocol(upstream: Upstream) -> None:
    provider = _provider(upstream)
    assert isinstance(provider, Provider)
    assert provider.supports_preview("run")


async def test_secret_header_is_resolved_at_call_time_and_never_returned(
    upstream: Upstream, secrets_backend: Backend,
) -> None:
    lookups: list[str] = []
    provider = _provider(upstream)
    ctx = _ctx(lookups=lookups, store=secrets_backend.store)
    assert lookups == []  # not at construction
    secrets_backend.put("crm", "token", SECRET)  # after the provider was built
    try:
        result = await provider.execute("run", {"order": 7}, ctx)
    finally:
        await provider.aclose()
    assert lookups == ["crm/token"]
    assert upstream.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert upstream.requests[0]["method"] == "POST"
    assert json.loads(upstream.requests[0]["body"]) == {"order": 7}
    assert SECRET not in json.dumps(result)  # the upstream echoed it; the result masks it
    assert result["headers"]["Authorization"] == "Bearer ***"
    assert ctx._resolved_secrets == [SECRET]  # the pipeline redacts it again


async def test_preview_shows_the_request_with_masked_secrets_and_sends_nothing(
    upstream: Upstream,
) -> None:
    lookups: list[str] = []
    provider = _provider(upstream)
    preview = await provider.preview("run", {"order": 7}, _ctx(lookups=lookups))
    assert preview.summary == f"POST {upstream.base}/echo"
    assert preview.data == {
        "method": "POST", "url": f"{upstream.base}/echo",
        "headers": {"Authorization": "Bearer ***", "X-Client": "toolkeeper-tests"},
        "body": {"order": 7},
    }
    assert lookups == [] and upstream.requests == []


async def test_get_sends_arguments_as_query_parameters(upstream: Upstream) -> None:
    provider = _provider(upstream, method="get", headers={})
    result = await provider.execute("run", {"q": "x y", "n": 2, "flag": True, "tags": ["a", "b"],
                                            "none": None}, _ctx())
    await provider.aclose()
    assert result["method"] == "GET" and result["body"] is None
    assert result["query"] == {"q": ["x y"], "n": ["2"], "flag": ["true"], "tags": ["a", "b"]}


async def test_get_keeps_the_configured_query_string(upstream: Upstream) -> None:
    provider = _provider(upstream, "/echo?v=2", method="GET", headers={})
    assert (await provider.execute("run", {}, _ctx()))["query"] == {"v": ["2"]}
    assert (await provider.execute("run", {"a": 1}, _ctx()))["query"] == {"v": ["2"], "a": ["1"]}
    await provider.aclose()


async def test_text_response_is_returned_as_text(upstream: Upstream) -> None:
    provider = _provider(upstream, "/text", headers={})
    assert await provider.execute("run", {}, _ctx()) == "héllo"
    await provider.aclose()


async def test_client_error_is_final_upstream_error(upstream: Upstream) -> None:
    provider = _provider(upstream, "/status/404")
    with pytest.raises(ToolError) as info:
        await provider.execute("run", {}, _ctx())
    await provider.aclose()
    assert info.value.reason == "upstream_error"
    assert not info.value.retryable
    assert info.value.details["status"] == 404


@pytest.mark.parametrize(("status", "executed"), [(500, True), (502, True), (503, False),
                                                  (429, False)])
async def test_server_errors_and_429_are_retryable(
    upstream: Upstream, status: int, executed: bool
) -> None:
    provider = _provider(upstream, f"/status/{status}")
    with pytest.raises(UpstreamError) as info:
        await provider.execute("run", {}, _ctx())
    await provider.aclose()
    assert info.value.reason == "upstream_error"
    assert info.value.retryable
    assert info.value.may_have_executed is executed


async def test_slow_upstream_is_a_timeout_that_may_have_executed(upstream: Upstream) -> None:
    provider = _provider(upstream, "/slow", timeout_s=0.3)
    with pytest.raises(ToolError) as info:
        await provider.execute("run", {}, _ctx())
    await provider.aclose()
    assert info.value.reason == "timeout"
    assert info.value.may_have_executed


async def test_refused_connection_is_retryable_and_did_not_execute() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = HttpProvider({"url": f"http://127.0.0.1:{port}/", "timeout_s": 2,
                             "allowed_networks": ["127.0.0.0/8"]})
    with pytest.raises(UpstreamError) as info:
        await provider.execute("run", {}, _ctx())
    await provider.aclose()
    assert info.value.retryable and not info.value.may_have_executed


async def test_response_above_the_cap_is_output_too_large(upstream: Upstream) -> None:
    provider = _provider(upstream, "/big", max_response_bytes=1000)
    with pytest.raises(ToolError) as info:
        await provider.execute("run", {}, _ctx())
    await provider.aclose()
    assert info.value.reason == "output_too_large"


async def test_missing_secret_fails_before_anything_is_sent(upstream: Upstream,
                                                            secrets_backend: Backend) -> None:
    provider = _provider(upstream)
    with pytest.raises(ToolError) as info:
        await provider.execute("run", {}, _ctx(store=secrets_backend.store))
    assert info.value.reason == "secret_not_found"
    assert upstream.requests == []


def test_loopback_url_without_allow_list_is_a_config_error(upstream: Upstream) -> None:
    with pytest.raises(ConfigError):
        HttpProvider({"url": upstream.base + "/echo"})


def test_unknown_config_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        HttpProvider({"url": "https://api.example.com/", "allowed_host": ["x"]})


async def test_name_resolving_to_a_private_address_is_refused_at_call_time() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["10.0.0.9"]

    provider = HttpProvider({"url": "https://api.example.com/v1"}, resolver=resolver)
    with pytest.raises(ToolDenied) as info:
        await provider.execute("run", {}, _ctx())
    await provider.aclose()
    assert info.value.reason == "address_not_allowed"


async def test_one_client_is_reused_and_aclose_is_idempotent(upstream: Upstream) -> None:
    provider = _provider(upstream, headers={})
    await provider.execute("run", {}, _ctx())
    client = provider._client
    await provider.execute("run", {}, _ctx())
    assert provider._client is client is not None
    await provider.aclose()
    await provider.aclose()
    assert provider._client is None
