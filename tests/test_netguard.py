"""SPEC §8: HTTP-based tools refuse private, loopback, link-local and metadata addresses unless
allow-listed, check every redirect hop and the resolved IP (no DNS rebinding)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.support.loopback import serving
from toolkeeper.errors import ConfigError, ToolDenied, ToolError
from toolkeeper.netguard import GuardedTransport, NetGuard, Resolver, is_public_address

REFUSED = [
    "127.0.0.1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "0.0.0.0", "224.0.0.1",
    "fd00:ec2::254", "100.100.100.200", "168.63.129.16", "240.0.0.1", "198.18.0.1",
    "2002:a00:1::", "64:ff9b::a00:1", "::a00:1", "ff02::1", "fec0::1",
]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/redirect":
            self.send_response(int(query.get("code", ["302"])[0]))
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if url.path == "/cookie":
            self.send_response(200)
            self.send_header("Set-Cookie", "session=abc123; Path=/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"path": url.path, "headers": dict(self.headers.items())}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """A loopback HTTP server: /echo, /redirect?to=…&code=…, /cookie."""
    with serving(_Handler) as url:
        yield url


def _resolver(table: dict[str, list[str]], calls: list[str] | None = None) -> Resolver:
    async def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        return table[host]

    return resolve


async def _get(guard: NetGuard, url: str, **headers: str) -> httpx.Response:
    async with guard.client(timeout=5.0) as client:
        response = await guard.send(client, client.build_request("GET", url, headers=headers))
        await response.aread()
        await response.aclose()
        return response


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


@pytest.mark.parametrize("address", REFUSED)
async def test_non_public_ip_literal_is_refused(address: str) -> None:
    with pytest.raises(ToolDenied) as info:
        await _get(NetGuard(), f"http://{_host(address)}/")
    assert info.value.reason == "address_not_allowed"


@pytest.mark.parametrize("address", REFUSED)
async def test_name_resolving_to_non_public_ip_is_refused(address: str) -> None:
    guard = NetGuard(resolver=_resolver({"public.example": [address]}))
    with pytest.raises(ToolDenied) as info:
        await _get(guard, "http://public.example/")
    assert info.value.reason == "address_not_allowed"


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8",
                                     "64:ff9b::808:808"])
def test_public_addresses_are_admitted(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert is_public_address(ip)
    NetGuard().check_ip(ip)


async def test_every_resolved_address_is_checked_not_just_the_first() -> None:
    guard = NetGuard(resolver=_resolver({"mixed.example": ["93.184.216.34", "10.1.2.3"]}))
    with pytest.raises(ToolDenied) as info:
        await _get(guard, "http://mixed.example/")
    assert info.value.reason == "address_not_allowed"
    assert info.value.details["address"] == "10.1.2.3"


async def test_allowed_network_admits_loopback(server: str) -> None:
    response = await _get(NetGuard(allowed_networks=["127.0.0.0/8"]), server + "/echo")
    assert response.status_code == 200


async def test_connection_is_pinned_to_the_vetted_ip_and_keeps_the_host_header(
    server: str,
) -> None:
    port = httpx.URL(server).port
    calls: list[str] = []
    guard = NetGuard(allowed_networks=["127.0.0.0/8"],
                     resolver=_resolver({"test.example": ["127.0.0.1"]}, calls))
    response = await _get(guard, f"http://test.example:{port}/echo")
    assert response.json()["headers"]["Host"] == f"test.example:{port}"
    assert calls == ["test.example"]  # resolved once, by the guard, for the socket it opened


async def test_rebinding_to_a_private_address_is_refused_on_the_next_connection(
    server: str,
) -> None:
    port = httpx.URL(server).port
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])

    async def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    guard = NetGuard(allowed_networks=["127.0.0.1/32"], resolver=rebinding)
    assert (await _get(guard, f"http://test.example:{port}/echo")).status_code == 200
    with pytest.raises(ToolDenied) as info:
        await _get(guard, f"http://test.example:{port}/echo")
    assert info.value.reason == "address_not_allowed"


async def test_host_allow_list_exact_and_wildcard() -> None:
    guard = NetGuard(allowed_hosts=["api.example.com", "*.svc.example.org"])
    guard.check_url("https://api.example.com/x")
    guard.check_url("https://API.Example.COM./x")
    guard.check_url("https://a.b.svc.example.org/")
    for url in ("https://example.com/", "https://svc.example.org/",
                "https://evilsvc.example.org/", "https://api.example.com.evil.net/"):
        with pytest.raises(ToolDenied) as info:
            guard.check_url(url)
        assert info.value.reason == "host_not_allowed", url


def test_host_deny_list_wins_over_the_allow_list() -> None:
    guard = NetGuard(allowed_hosts=["*.example.org"],
                     denied_hosts=["admin.example.org", "*.internal.example.org", "10.1.2.3"])
    guard.check_url("https://www.example.org/")
    for url in ("https://ADMIN.example.org./", "https://a.internal.example.org/",
                "http://10.1.2.3/", "https://www.example.com/"):
        with pytest.raises(ToolDenied) as info:
            guard.check_url(url)
        assert info.value.reason == "host_not_allowed", url


async def test_listed_host_still_needs_a_public_address() -> None:
    guard = NetGuard(allowed_hosts=["intranet.example"],
                     resolver=_resolver({"intranet.example": ["10.0.0.5"]}))
    with pytest.raises(ToolDenied) as info:
        await _get(guard, "http://intranet.example/")
    assert info.value.reason == "address_not_allowed"


async def test_metadata_host_name_is_refused_without_resolving() -> None:
    calls: list[str] = []
    guard = NetGuard(resolver=_resolver({}, calls))
    with pytest.raises(ToolDenied) as info:
        await _get(guard, "http://metadata.google.internal/computeMetadata/v1/")
    assert info.value.reason == "address_not_allowed"
    assert calls == []


@pytest.mark.parametrize("url", ["ftp://example.com/", "file:///etc/passwd",
                                 "http://user:pw@example.com/", "https://example.com:8443/",
                                 "http:///nohost"])
def test_bad_scheme_userinfo_port_and_missing_host_are_refused(url: str) -> None:
    with pytest.raises(ToolDenied) as info:
        NetGuard(allowed_ports=[80, 443]).check_url(url)
    assert info.value.reason == "address_not_allowed"


def test_invalid_allowed_network_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        NetGuard(allowed_networks=["10.0.0.0/33"])


async def test_redirect_within_the_allow_list_is_followed(server: str) -> None:
    guard = NetGuard(allowed_networks=["127.0.0.1/32"])
    response = await _get(guard, f"{server}/redirect?to=/echo")
    assert response.status_code == 200
    assert response.json()["path"] == "/echo"


@pytest.mark.parametrize("target", ["http://127.0.0.2:{port}/echo", "http://169.254.169.254/",
                                    "http://[::1]:{port}/echo"])
async def test_redirect_hop_to_an_unlisted_address_is_refused(server: str, target: str) -> None:
    guard = NetGuard(allowed_networks=["127.0.0.1/32"])
    location = target.format(port=httpx.URL(server).port)
    with pytest.raises(ToolError) as info:
        await _get(guard, f"{server}/redirect?to={location}")
    assert info.value.reason == "address_not_allowed"
    assert info.value.may_have_executed  # the first hop reached the upstream


async def test_redirect_hop_to_another_scheme_is_refused(server: str) -> None:
    guard = NetGuard(allowed_networks=["127.0.0.1/32"])
    with pytest.raises(ToolError) as info:
        await _get(guard, f"{server}/redirect?to=file:///etc/passwd")
    assert info.value.reason == "address_not_allowed"


async def test_redirect_loop_stops_at_max_redirects(server: str) -> None:
    guard = NetGuard(allowed_networks=["127.0.0.1/32"], max_redirects=2)
    with pytest.raises(ToolError) as info:
        await _get(guard, f"{server}/redirect?to=/redirect%3Fto%3D/redirect%253Fto%253D/echo"
                          "%2526code%253D307")
    assert info.value.reason == "upstream_error"
    assert "more than 2 redirects" in info.value.message


async def test_cross_origin_redirect_drops_credentials(server: str) -> None:
    port = httpx.URL(server).port
    guard = NetGuard(allowed_networks=["127.0.0.1/32"],
                     resolver=_resolver({"other.test": ["127.0.0.1"]}))
    async with guard.client(timeout=5.0) as client:
        request = client.build_request(
            "GET", f"{server}/redirect?to=http://other.test:{port}/echo",
            headers={"Authorization": "Bearer s3cr3t", "X-Api-Key": "k3y-value"},
        )
        response = await guard.send(client, request, sensitive_headers=["x-api-key"])
        await response.aread()
    headers = {k.lower(): v for k, v in response.json()["headers"].items()}
    assert "authorization" not in headers and "x-api-key" not in headers
    assert headers["host"] == f"other.test:{port}"


async def test_shared_client_does_not_carry_cookies_between_calls(server: str) -> None:
    guard = NetGuard(allowed_networks=["127.0.0.1/32"])
    async with guard.client(timeout=5.0) as client:
        for path in ("/cookie", "/echo"):
            response = await guard.send(client, client.build_request("GET", server + path))
            await response.aread()
    assert "Cookie" not in response.json()["headers"]


async def test_slow_resolver_is_a_connect_timeout_that_did_not_execute() -> None:
    async def hanging(host: str, port: int) -> list[str]:
        await asyncio.sleep(30)
        return []

    guard = NetGuard(resolver=hanging)
    async with guard.client(timeout=httpx.Timeout(5.0, connect=0.2)) as client:
        with pytest.raises(ToolError) as info:
            await asyncio.wait_for(
                guard.send(client, client.build_request("GET", "http://slow.example/")), 5)
    assert info.value.reason == "timeout"
    assert info.value.retryable and not info.value.may_have_executed


def test_transport_is_guarded() -> None:
    assert isinstance(NetGuard().transport(), GuardedTransport)


@pytest.mark.parametrize("url", [
    "http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/",
    "http://0/", "http://017700000001/", "http://0x7f.1/", "http://169.254.43518/",
    "http://localhost/", "http://LOCALHOST./", "http://a.localhost/",
    "http://localhost.localdomain/", "http://ip6-localhost/", "http://ip6-loopback/",
])
def test_check_url_refuses_inward_spellings_without_resolving(url: str) -> None:
    # no resolver is asked: every inet_aton spelling is the address it names, and the
    # loopback names are loopback whatever a resolver says (issue 26 items 10 and 8's kin)
    with pytest.raises(ToolDenied) as info:
        NetGuard(resolver=_never).check_url(url)
    assert info.value.reason == "address_not_allowed"


@pytest.mark.parametrize("url", ["http://0x5db8d822/", "http://deadbeef.example/",
                                 "http://1.1/", "http://cafe/"])
def test_check_url_admits_public_numeric_spellings_and_plain_names(url: str) -> None:
    NetGuard(resolver=_never).check_url(url)


async def _never(host: str, port: int) -> list[str]:
    raise AssertionError(f"check_url resolved {host}")
