"""SSRF attack suite (SPEC §8): inward addresses in every spelling — loopback, private,
link-local, cloud metadata, IPv4-mapped IPv6, decimal/hex/octal/short IPv4, names resolving
inward, redirects inward — are refused before connecting by ``http_request``, ``web_fetch``
and the HTTP provider. Inward targets that are loopback point at recording servers, which must
see no request; other addresses are only asserted refused (never contacted)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.attacks.table import ProbeTable
from toolkeeper import Activation, Agent, Gateway, Profile
from toolkeeper.builtins import definition
from toolkeeper.errors import ConfigError, ToolDenied
from toolkeeper.providers.http import HttpProvider

REFUSALS = {"address_not_allowed", "host_not_allowed"}
ELSEWHERE = [  # never contacted: the guard must refuse them before any connect
    "http://10.0.0.1/", "http://172.16.0.1/", "http://192.168.1.1/", "http://100.64.0.1/",
    "http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/",
    "http://100.100.100.200/", "http://168.63.129.16/", "http://[fd00:ec2::254]/",
    "http://[fe80::1]/", "http://[fc00::1]/", "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/", "http://[::ffff:10.0.0.1]/", "http://2852039166/",
    "http://0xa9fea9fe/", "http://0251.0376.0251.0376/", "http://[64:ff9b::a9fe:a9fe]/",
    "http://METADATA.google.internal./",
]


class Recorder:
    """A loopback HTTP server on ``host`` counting every request; ``/redirect?to=`` redirects."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.hits: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits.append(self.path)
                if self.path.startswith("/redirect?to="):
                    self.send_response(302)
                    self.send_header("Location", self.path.split("=", 1)[1])
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def inward() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.close()


def _loopback_spellings(port: int) -> list[str]:
    return [f"http://127.0.0.1:{port}/", f"http://localhost:{port}/",
            f"http://2130706433:{port}/", f"http://0x7f000001:{port}/",
            f"http://0177.0.0.1:{port}/", f"http://127.1:{port}/", f"http://0.0.0.0:{port}/",
            f"http://[::ffff:127.0.0.1]:{port}/", f"http://[::ffff:7f00:1]:{port}/",
            f"http://[::1]:{port}/", f"http://LOCALHOST:{port}/"]


def _gateway(db_url: str, **policy: Any) -> Gateway:
    gw = Gateway.open(db_url)
    gw.registry.register(definition("http_request"))
    gw.registry.register(definition("web_fetch"))
    gw.registry.put_profile(Profile(name="net", tenant_id="default", autonomy=3, activations=[
        Activation(tool="http_request", policy=policy),
        Activation(tool="web_fetch", policy=policy)]))
    gw.registry.put_agent(Agent(name="bot", profile="net", tenant_id="default"))
    return gw


def _probe(gw: Gateway, tool: str, url: str) -> tuple[str, bool]:
    args: dict[str, Any] = {"url": url}
    if tool == "http_request":
        args["method"] = "GET"
    result = gw.call_sync(tool, arguments=args, agent="bot")
    observed = f"{result.status} {result.reason}"
    return observed, (not result.ok and str(result.reason) in REFUSALS
                      and str(result.status) in ("denied", "CallStatus.DENIED"))


def test_builtins_refuse_every_inward_spelling(db_url: str, inward: Recorder) -> None:
    table = ProbeTable("SSRF: http_request and web_fetch")
    with _gateway(db_url) as gw:
        for tool in ("http_request", "web_fetch"):
            for url in _loopback_spellings(inward.port) + ELSEWHERE:
                observed, held = _probe(gw, tool, url)
                table.add(f"{tool} {url}", "denied (refusal)", observed, held)
    table.add("loopback recorder contacted", "0 requests", f"{len(inward.hits)} requests",
              not inward.hits)
    table.check()


def test_redirects_inward_are_refused_at_the_hop(db_url: str) -> None:
    """The first hop (allow-listed loopback) may be reached; the inward hop never is."""
    entry, target = Recorder("127.0.0.1"), Recorder("127.0.0.2")
    table = ProbeTable("SSRF: redirects inward")
    try:
        with _gateway(db_url, allowed_networks=["127.0.0.1/32"]) as gw:
            hops = [f"http://127.0.0.2:{target.port}/", f"http://0x7f000002:{target.port}/",
                    f"http://[::ffff:127.0.0.2]:{target.port}/", "http://169.254.169.254/",
                    f"http://2130706434:{target.port}/"]
            for tool in ("http_request", "web_fetch"):
                for hop in hops:
                    url = f"http://127.0.0.1:{entry.port}/redirect?to={hop}"
                    args: dict[str, Any] = {"url": url}
                    if tool == "http_request":
                        args["method"] = "GET"
                    result = gw.call_sync(tool, arguments=args, agent="bot")
                    table.add(f"{tool} -> {hop}", "refused", f"{result.status} {result.reason}",
                              not result.ok and str(result.reason) in REFUSALS)
        table.add("inward redirect target contacted", "0 requests",
                  f"{len(target.hits)} requests", not target.hits)
        table.check()
    finally:
        entry.close()
        target.close()


async def _load_and_call(url: str) -> str:
    """A literal inward URL is a ConfigError at load; a name (``localhost``, ``2130706433``)
    passes the load check and must be refused at call time, after resolving."""
    try:
        provider = HttpProvider({"url": url})
    except ConfigError:
        return "ConfigError"
    try:
        await provider.execute("run", {}, None)  # type: ignore[arg-type]
        return "executed"
    except ToolDenied as exc:
        return exc.reason
    except Exception as exc:
        return type(exc).__name__
    finally:
        await provider.aclose()


INWARD_IPS = ["127.0.0.1", "10.1.2.3", "172.31.0.1", "192.168.0.1", "169.254.169.254",
              "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1",
              "::ffff:169.254.169.254", "64:ff9b::7f00:1", "2002:7f00:1::"]


async def test_http_provider_refuses_names_resolving_inward() -> None:
    """A public-looking name whose DNS answer is inward (rebinding) is refused at call time,
    through the provider's injectable resolver; a literal inward URL is refused at load."""
    table = ProbeTable("SSRF: HTTP provider")
    for ip in INWARD_IPS:
        async def resolver(host: str, port: int, ip: str = ip) -> list[str]:
            return [ip]

        provider = HttpProvider({"url": "https://api.example.com/v1"}, resolver=resolver)
        try:
            await provider.execute("run", {}, None)  # type: ignore[arg-type]
            observed = "executed"
        except ToolDenied as exc:
            observed = exc.reason
        except Exception as exc:
            observed = type(exc).__name__
        finally:
            await provider.aclose()
        table.add(f"api.example.com -> {ip}", "address_not_allowed", observed,
                  observed == "address_not_allowed")
    for url in _loopback_spellings(80) + ELSEWHERE:
        observed = await _load_and_call(url)
        table.add(f"load+call {url}", "ConfigError or refused", observed,
                  observed in ("ConfigError", "address_not_allowed"))
    table.check()
