"""SSRF guard for every HTTP-based provider and built-in (SPEC §8).

A ``NetGuard`` holds one allow-list and enforces it on each connection its transport opens:

- URL: scheme ``http``/``https`` only, no userinfo, port in ``allowed_ports`` when set, host
  in ``allowed_hosts`` when that list is non-empty (exact names or ``*.suffix``), not in
  ``denied_hosts`` (same forms; a denial wins over a listing), no cloud-metadata host
  name unless listed exactly, and ``localhost``/``*.localhost`` (any case, trailing dots)
  taken as the loopback address they always name (RFC 6761) without asking DNS.
- Address: the guard resolves the name itself and refuses the connection if ANY resolved
  address is private, loopback, link-local, multicast, reserved, unspecified, CGNAT, a cloud
  metadata endpoint, or an IPv6 form embedding such an IPv4 address (mapped, compatible,
  6to4, NAT64) — unless it lies in ``allowed_networks``. A listed host is still subject to
  the address check: an internal service needs both its name and its network listed.
- Pinning: the check runs inside the connection pool's network backend, and the socket is
  opened to the very address that was checked, so a second DNS answer (rebinding) never
  reaches a socket. The URL keeps the host name, so the ``Host`` header, TLS SNI and
  certificate verification are those of the name, and pooled connections are keyed by name.
- Redirects are never followed by httpx; ``NetGuard.send`` follows up to ``max_redirects``
  hops itself and every hop passes the same checks.

Refusals raise ``ToolDenied`` (``address_not_allowed`` / ``host_not_allowed``). Once a first
request has been sent, a refused redirect hop is a ``ToolError`` with
``may_have_executed=True`` instead: the upstream already acted on the first request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpcore
import httpx

from toolkeeper.errors import ConfigError, ToolDenied, ToolError, UpstreamError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: how the guard resolves names (injectable for tests)."""

METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
_net = ipaddress.ip_network
METADATA_NETWORKS: tuple[IPNetwork, ...] = (
    _net("169.254.169.254/32"),  # AWS, GCP, Azure, OpenStack, DigitalOcean…
    _net("169.254.170.2/32"),  # AWS ECS task metadata
    _net("fd00:ec2::254/128"),  # AWS IMDS over IPv6
    _net("100.100.100.200/32"),  # Alibaba Cloud
    _net("168.63.129.16/32"),  # Azure WireServer: a public address, so listed by hand
)
# Refused on top of what ``ipaddress`` calls non-global, whatever the Python patch level.
_BLOCKED_NETWORKS: tuple[IPNetwork, ...] = (
    *METADATA_NETWORKS,
    _net("0.0.0.0/8"), _net("10.0.0.0/8"), _net("100.64.0.0/10"), _net("127.0.0.0/8"),
    _net("169.254.0.0/16"), _net("172.16.0.0/12"), _net("192.0.0.0/24"),
    _net("192.168.0.0/16"), _net("198.18.0.0/15"), _net("224.0.0.0/4"), _net("240.0.0.0/4"),
    _net("::/128"), _net("::1/128"), _net("64:ff9b:1::/48"), _net("fc00::/7"),
    _net("fe80::/10"), _net("fec0::/10"), _net("ff00::/8"),
)
_LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost",
                             "ip6-loopback"})
"""Names that mean loopback (RFC 6761 and Debian's ``/etc/hosts``), whatever a resolver says."""
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+")
_NAT64 = _net("64:ff9b::/96")
_V4_COMPATIBLE = _net("::/96")
_STRIPPED_ON_CROSS_ORIGIN = ("authorization", "proxy-authorization", "cookie")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _V4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is an ordinary global unicast address a tool may reach by default."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            if ip.ipv4_mapped is not None or ip in _V4_COMPATIBLE or ip in _NAT64:
                return is_public_address(inner)  # the packets really go to ``inner``
            if not is_public_address(inner):
                return False
        if ip.is_site_local:
            return False
    if any(ip in net for net in _BLOCKED_NETWORKS):
        return False
    return not (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
        or ip.is_reserved or ip.is_unspecified or not ip.is_global
    )


def parse_ip(host: str) -> IPAddress | None:
    """``host`` as an IP address, or ``None`` when it is a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``host`` as the IPv4 address a resolver reads it as in any ``inet_aton`` spelling
    (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``0``), or ``None``."""
    if not _NUMERIC_HOST.fullmatch(host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the event loop's ``getaddrinfo`` (every address family)."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _deny(reason: str, message: str, **details: Any) -> ToolDenied:
    return ToolDenied(reason, message, **details)


class NetGuard:
    """One allow-list, enforced on URLs, resolved addresses and every redirect hop."""

    def __init__(
        self,
        *,
        allowed_hosts: Sequence[str] = (),
        allowed_networks: Sequence[str] = (),
        allowed_ports: Collection[int] | None = None,
        max_redirects: int = 5,
        resolver: Resolver | None = None,
        denied_hosts: Sequence[str] = (),
    ) -> None:
        self._exact, self._suffixes = _host_patterns(allowed_hosts)
        self._denied = _host_patterns(denied_hosts)
        try:
            self._networks = tuple(ipaddress.ip_network(n, strict=False) for n in allowed_networks)
        except ValueError as exc:
            raise ConfigError(f"allowed_networks: {exc}") from None
        self._ports = frozenset(allowed_ports) if allowed_ports is not None else None
        if max_redirects < 0:
            raise ConfigError("max_redirects must be >= 0")
        self.max_redirects = max_redirects
        self._resolver = resolver or system_resolver

    def check_url(self, url: httpx.URL | str) -> httpx.URL:
        """The parsed URL if scheme, userinfo, port and host pass; ``ToolDenied`` otherwise."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise _deny("address_not_allowed", f"invalid URL: {exc}") from None
        if parsed.scheme not in ("http", "https"):
            raise _deny("address_not_allowed", f"scheme {parsed.scheme!r} is not allowed")
        if parsed.userinfo:
            raise _deny("address_not_allowed", "credentials in the URL are not allowed")
        host = _normalize_host(parsed.raw_host.decode("ascii"))
        if not host:
            raise _deny("address_not_allowed", "the URL has no host")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if self._ports is not None and port not in self._ports:
            raise _deny("address_not_allowed", f"port {port} is not allowed", port=port)
        self.check_host(host)
        return parsed

    def check_host(self, host: str) -> None:
        """Host allow-list, metadata names, and the address check for IP literals."""
        host = _normalize_host(host)
        if _host_matches(host, *self._denied):
            raise _deny("host_not_allowed", f"host {host!r} is denied", host=host)
        if (self._exact or self._suffixes) and not _host_matches(host, self._exact,
                                                                 self._suffixes):
            raise _deny("host_not_allowed", f"host {host!r} is not allowed", host=host)
        ip = parse_ip(host) or numeric_ipv4(host)
        if ip is not None:
            self.check_ip(ip)
        elif host in _LOOPBACK_NAMES or host.endswith(".localhost"):
            self.check_ip(_LOOPBACK)  # RFC 6761 §6.3, whatever this host's resolver says
        elif host in METADATA_HOSTS and host not in self._exact:
            raise _deny("address_not_allowed", f"{host!r} is a metadata endpoint", host=host)

    def check_ip(self, ip: IPAddress) -> None:
        """Refuse a non-public address unless it lies in ``allowed_networks``."""
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address) and (inner := embedded_ipv4(ip)) is not None:
            candidates.append(inner)
        for candidate in candidates:
            if any(candidate in net for net in self._networks):
                return
        if not is_public_address(ip):
            raise _deny("address_not_allowed", f"address {ip} is not allowed", address=str(ip))

    async def check_destination(self, url: httpx.URL | str,
                                timeout_s: float = 5.0) -> httpx.URL:
        """Check ``url`` now as a connection to it would be checked, for a setting stored
        to be used later: :meth:`check_url`, then :meth:`resolve` of its host as the
        transport resolves it (``getaddrinfo``, so ``127.1``, ``2130706433`` and
        ``0x7f000001`` are the loopback address they are). A name that does not resolve
        within ``timeout_s`` passes: each later connection is checked again anyway."""
        parsed = self.check_url(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            async with asyncio.timeout(timeout_s):
                await self.resolve(parsed.raw_host.decode("ascii"), port)
        except (OSError, TimeoutError):
            pass
        return parsed

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address of ``host``, each checked; refuses if any one is not allowed."""
        literal = parse_ip(host)
        if literal is not None:
            self.check_ip(literal)
            return [literal]
        answers = await self._resolver(host, port)
        addresses: list[IPAddress] = []
        for answer in answers:
            ip = parse_ip(answer.split("%", 1)[0])  # drop an IPv6 zone id
            if ip is None:
                raise OSError(f"resolver returned {answer!r} for {host!r}")
            self.check_ip(ip)
            addresses.append(ip)
        if not addresses:
            raise OSError(f"no address for {host!r}")
        return addresses

    def transport(
        self, *, verify: bool | str = True, limits: httpx.Limits | None = None
    ) -> GuardedTransport:
        """An httpx transport whose every connection passes this guard."""
        return GuardedTransport(self, verify=verify, limits=limits)

    def client(
        self, *, timeout: httpx.Timeout | float = 10.0, verify: bool | str = True
    ) -> httpx.AsyncClient:
        """A client for guarded calls: no redirects, no proxies from the environment, and
        no cookie jar (a shared client must not carry one caller's cookies to the next)."""
        return httpx.AsyncClient(
            transport=self.transport(verify=verify),
            follow_redirects=False,
            trust_env=False,
            timeout=timeout,
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            headers={"User-Agent": "toolkeeper"},
        )

    async def send(
        self,
        client: httpx.AsyncClient,
        request: httpx.Request,
        *,
        sensitive_headers: Iterable[str] = (),
    ) -> httpx.Response:
        """Send ``request``, following redirects hop by hop under the guard.

        Returns the final response unread (stream it, then close it). ``sensitive_headers``
        are dropped, with ``Authorization`` and ``Cookie``, when a hop changes origin.
        httpx errors are translated to ``ToolError``s.
        """
        strip = {*_STRIPPED_ON_CROSS_ORIGIN, *(h.lower() for h in sensitive_headers)}
        for hop in range(self.max_redirects + 1):
            try:
                self.check_url(request.url)
                response = await client.send(request, stream=True, follow_redirects=False)
            except ToolDenied as exc:
                if hop == 0:
                    raise
                raise ToolError(
                    exc.reason, f"redirect hop {hop}: {exc.message}", may_have_executed=True,
                    **exc.details,
                ) from None
            except httpx.RequestError as exc:
                raise request_error(exc, sent=hop > 0) from exc
            if not response.has_redirect_location:
                return response
            await response.aclose()
            if hop == self.max_redirects:
                break
            request = _redirect_request(request, response, strip)
        raise ToolError(
            "upstream_error", f"more than {self.max_redirects} redirects",
            may_have_executed=True,
        )



def _normalize_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _host_patterns(hosts: Sequence[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Exact names and ``*.suffix`` patterns (kept as ``.suffix``) of a host list."""
    normalized = tuple(_normalize_host(h) for h in hosts)
    return (frozenset(h for h in normalized if not h.startswith("*.")),
            tuple(h[1:] for h in normalized if h.startswith("*.")))


def _host_matches(host: str, exact: frozenset[str], suffixes: tuple[str, ...]) -> bool:
    if host in exact:
        return True
    ip = parse_ip(host)
    if ip is not None:
        return any(parse_ip(h) == ip for h in exact)
    return any(host.endswith(suffix) for suffix in suffixes)


def _redirect_request(
    request: httpx.Request, response: httpx.Response, strip: set[str]
) -> httpx.Request:
    """The next hop's request, as a browser would build it (RFC 9110 §15.4)."""
    try:
        url = request.url.join(response.headers["Location"])
    except httpx.InvalidURL as exc:
        raise UpstreamError(f"bad redirect location: {exc}", retryable=False,
                            may_have_executed=True) from None
    method = request.method
    if (response.status_code == 303 and method != "HEAD") or (
        response.status_code in (301, 302) and method == "POST"
    ):
        method = "GET"
    headers = httpx.Headers(request.headers)
    del headers["host"]  # rebuilt from the new URL
    if (url.scheme, url.raw_host, url.port) != (
        request.url.scheme, request.url.raw_host, request.url.port
    ):
        for name in strip:
            headers.pop(name, None)
    content: bytes | None = None
    if method == request.method:
        content = request.content or None
    else:
        for name in ("content-length", "content-type", "transfer-encoding"):
            headers.pop(name, None)
    return httpx.Request(method, url, headers=headers, content=content,
                         extensions=request.extensions)


def request_error(exc: httpx.RequestError, *, sent: bool) -> ToolError:
    """Translate an httpx failure; ``sent`` = an earlier request already reached upstream.

    Failures while connecting could not have reached the upstream (retryable, did not
    execute); anything later may have.
    """
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return ToolError("timeout", f"connect timed out: {exc}", retryable=True,
                         may_have_executed=sent)
    if isinstance(exc, httpx.TimeoutException):
        return ToolError("timeout", f"upstream timed out: {exc}", retryable=True,
                         may_have_executed=True)
    if isinstance(exc, httpx.ConnectError):
        return UpstreamError(f"cannot connect: {exc}", may_have_executed=sent)
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ToolError("address_not_allowed", str(exc), may_have_executed=sent)
    return UpstreamError(f"{type(exc).__name__}: {exc}", may_have_executed=True)


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Opens TCP connections only to addresses the guard has just checked."""

    def __init__(self, guard: NetGuard, inner: httpcore.AsyncNetworkBackend) -> None:
        self._guard = guard
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._guard.resolve(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout=timeout, local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through the guard")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """``AsyncHTTPTransport`` whose pool connects through the guard (no proxies).

    httpx offers no public hook for the network backend, so the pool is rebuilt with the
    same settings; ``tests/test_netguard.py`` pins this against httpx upgrades.
    """

    def __init__(
        self, guard: NetGuard, *, verify: bool | str = True, limits: httpx.Limits | None = None
    ) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        ssl_context = httpx.create_ssl_context(verify=verify, trust_env=False)
        super().__init__(verify=ssl_context, trust_env=False, limits=limits)
        self._guard = guard
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(guard, httpcore.AnyIOBackend()),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Check the URL, then send; the connection itself is checked in the backend."""
        self._guard.check_url(request.url)
        return await super().handle_async_request(request)
