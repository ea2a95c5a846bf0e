"""Built-in ``http_request`` (SPEC §11, §8): happy, deny, validation and limit paths, run
through the native provider boundary the pipeline uses."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from pydantic import ValidationError

from tests.support.loopback import serving
from toolkeeper.builtins.http_request import HttpRequestPolicy, HttpRequestTool
from toolkeeper.errors import ToolDenied, ToolError, UpstreamError
from toolkeeper.model.enums import Autonomy, SideEffect
from toolkeeper.netguard import Resolver
from toolkeeper.providers.base import ToolContext
from toolkeeper.providers.native import NativeProvider

LOOPBACK = {"allowed_networks": ("127.0.0.0/8",)}
_RELEASE = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    def _reply(self, status: int, body: bytes, ctype: str = "application/json",
               extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else None
        if url.path == "/redirect":
            self._reply(302, b"", extra={"Location": query["to"][0]})
        elif url.path.startswith("/status/"):
            self._reply(int(url.path.rsplit("/", 1)[1]), b'{"error": "nope"}')
        elif url.path == "/big":
            self._reply(200, b"y" * 5000, "text/plain")
        elif url.path == "/slow":
            _RELEASE.wait(5)
            self._reply(200, b"{}")
        else:
            echo = {"method": self.command, "path": url.path, "query": query, "body": body,
                    "host": self.headers["Host"], "content_type": self.headers["Content-Type"]}
            self._reply(200, json.dumps(echo).encode())

    do_GET = do_HEAD = do_POST = do_PUT = _handle

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """A loopback HTTP server: echo, /redirect?to=, /status/N, /big, /slow."""
    _RELEASE.clear()
    with serving(_Handler) as url:
        yield url
        _RELEASE.set()


def _ctx(**policy: Any) -> ToolContext:
    return ToolContext(
        call_id="c1", tenant_id="t1", agent="a1", tool="http_request", action="run",
        tool_version="1.0.0", autonomy=Autonomy.GUARDED, granted_scopes=frozenset(),
        policy=HttpRequestPolicy(**policy),
    )


@pytest.fixture
async def tool() -> AsyncIterator[HttpRequestTool]:
    instance = HttpRequestTool()
    yield instance
    await instance.aclose()


async def _run(tool: HttpRequestTool, args: dict[str, Any], **policy: Any) -> Any:
    return await NativeProvider(tool).execute("run", args, _ctx(**policy))


async def test_get_returns_status_headers_and_parsed_json(
    tool: HttpRequestTool, server: str
) -> None:
    result = await _run(tool, {"url": server + "/echo", "query": {"q": "toolkeeper"}},
                        **LOOPBACK)
    assert result["status"] == 200 and result["truncated"] is False
    assert result["headers"]["content-type"] == "application/json"
    assert set(result["headers"]) == {"content-type", "content-length"}
    assert result["body"]["query"] == {"q": ["toolkeeper"]}


async def test_post_sends_json_or_text_when_the_policy_allows_it(
    tool: HttpRequestTool, server: str
) -> None:
    policy = {**LOOPBACK, "allowed_methods": ("GET", "post")}
    result = await _run(tool, {"method": "POST", "url": server + "/echo", "body": {"a": 1}},
                        **policy)
    assert json.loads(result["body"]["body"]) == {"a": 1}
    assert result["body"]["content_type"] == "application/json"
    result = await _run(tool, {"method": "POST", "url": server + "/echo", "body": "plain"},
                        **policy)
    assert result["body"]["body"] == "plain"
    assert result["body"]["content_type"].startswith("text/plain")


async def test_head_has_no_body(tool: HttpRequestTool, server: str) -> None:
    result = await _run(tool, {"method": "HEAD", "url": server + "/echo"}, **LOOPBACK)
    assert result["status"] == 200 and result["body"] is None


async def test_loopback_is_refused_without_the_allow_list(
    tool: HttpRequestTool, server: str
) -> None:
    with pytest.raises(ToolDenied) as info:
        await _run(tool, {"url": server + "/echo"})
    assert info.value.reason == "address_not_allowed"


async def test_method_outside_the_policy_is_refused(tool: HttpRequestTool, server: str) -> None:
    with pytest.raises(ToolDenied) as info:
        await _run(tool, {"method": "DELETE", "url": server + "/echo"}, **LOOPBACK)
    assert info.value.reason == "method_not_allowed"


async def test_host_outside_the_allow_list_is_refused(tool: HttpRequestTool) -> None:
    with pytest.raises(ToolDenied) as info:
        await _run(tool, {"url": "https://evil.example.net/"}, allowed_hosts=("api.example.com",))
    assert info.value.reason == "host_not_allowed"


@pytest.mark.parametrize(("policy", "reason"), [
    ({"allowed_hosts": ("127.0.0.1",), "allowed_networks": ("127.0.0.1/32",)},
     "host_not_allowed"),
    ({"allowed_networks": ("127.0.0.1/32",)}, "address_not_allowed"),
])
async def test_redirect_to_an_unlisted_loopback_address_is_refused_at_the_hop(
    tool: HttpRequestTool, server: str, policy: dict[str, Any], reason: str
) -> None:
    port = httpx.URL(server).port
    # The first hop is allowed and followed; the second points at 127.0.0.2, not listed.
    ok = await _run(tool, {"url": f"{server}/redirect?to=/echo"}, **policy)
    assert ok["body"]["path"] == "/echo"
    with pytest.raises(ToolError) as info:
        await _run(tool, {"url": f"{server}/redirect?to=http://127.0.0.2:{port}/echo"}, **policy)
    assert info.value.reason == reason
    assert info.value.may_have_executed


async def test_redirect_to_the_metadata_address_is_refused(
    tool: HttpRequestTool, server: str
) -> None:
    with pytest.raises(ToolError) as info:
        await _run(tool, {"url": f"{server}/redirect?to=http://169.254.169.254/latest/"},
                   allowed_networks=("127.0.0.1/32",))
    assert info.value.reason == "address_not_allowed"


def _resolver(address: str) -> Resolver:
    async def resolve(host: str, port: int) -> list[str]:
        return [address]

    return resolve


async def test_public_name_resolving_to_a_private_address_is_refused() -> None:
    tool = HttpRequestTool(resolver=_resolver("10.20.30.40"))
    with pytest.raises(ToolDenied) as info:
        await _run(tool, {"url": "http://public.example/"})
    await tool.aclose()
    assert info.value.reason == "address_not_allowed"


async def test_connection_goes_to_the_vetted_ip_with_the_original_host(server: str) -> None:
    port = httpx.URL(server).port
    tool = HttpRequestTool(resolver=_resolver("127.0.0.1"))
    result = await _run(tool, {"url": f"http://test.example:{port}/echo"}, **LOOPBACK)
    await tool.aclose()
    assert result["body"]["host"] == f"test.example:{port}"


async def test_oversized_body_is_truncated_or_refused(tool: HttpRequestTool, server: str) -> None:
    result = await _run(tool, {"url": server + "/big"}, max_response_bytes=100, **LOOPBACK)
    assert result["truncated"] is True and result["body"] == "y" * 100
    with pytest.raises(ToolError) as info:
        await _run(tool, {"url": server + "/big"}, max_response_bytes=100, on_oversize="fail",
                   **LOOPBACK)
    assert info.value.reason == "output_too_large"


async def test_client_error_is_a_result_and_server_error_is_retryable(
    tool: HttpRequestTool, server: str
) -> None:
    result = await _run(tool, {"url": server + "/status/404"}, **LOOPBACK)
    assert result["status"] == 404 and result["body"] == {"error": "nope"}
    with pytest.raises(UpstreamError) as info:
        await _run(tool, {"url": server + "/status/502"}, **LOOPBACK)
    assert info.value.reason == "upstream_error" and info.value.retryable


async def test_slow_upstream_times_out(tool: HttpRequestTool, server: str) -> None:
    with pytest.raises(ToolError) as info:
        await _run(tool, {"url": server + "/slow"}, timeout_s=0.3, **LOOPBACK)
    assert info.value.reason == "timeout"


@pytest.mark.parametrize("args", [
    {"url": "http://example.com/", "headers": {"Host": "internal"}},
    {"url": "http://example.com/", "headers": {"Transfer-Encoding": "chunked"}},
    {"url": "http://example.com/", "body": {"a": 1}},
])
async def test_smuggling_headers_and_get_bodies_are_refused(
    tool: HttpRequestTool, args: dict[str, Any]
) -> None:
    with pytest.raises(ToolDenied) as info:
        await _run(tool, args)
    assert info.value.reason == "invalid_arguments"


async def test_preview_checks_the_policy_and_sends_nothing(
    tool: HttpRequestTool, server: str
) -> None:
    provider = NativeProvider(tool)
    assert provider.supports_preview("run")
    preview = await provider.preview("run", {"url": server + "/slow", "query": {"a": "1"}},
                                     _ctx(**LOOPBACK))
    assert preview is not None
    assert preview.summary == f"GET {server}/slow?a=1"  # /slow would hang if it were sent
    with pytest.raises(ToolDenied):
        await provider.preview("run", {"method": "PUT", "url": server}, _ctx(**LOOPBACK))


def test_policy_rejects_bad_networks_and_unknown_keys() -> None:
    with pytest.raises(ValidationError):
        HttpRequestPolicy(allowed_networks=("not-a-network",))
    with pytest.raises(ValidationError):
        HttpRequestPolicy.model_validate({"allowed_host": ["x"]})


def test_definition_is_a_registrable_tool() -> None:
    definition = HttpRequestTool.definition()
    assert definition.name == "http_request"
    assert definition.action_side_effect("run") is SideEffect.IRREVERSIBLE
    assert definition.action_input_schema("run")["required"] == ["url"]
    assert HttpRequestTool.definition(side_effect=SideEffect.PURE).side_effect is SideEffect.PURE
