"""Built-in ``web_fetch`` (issue 10 item 1): happy, deny, validation and limit paths through
the Gateway on SQLite and PostgreSQL, against a loopback server the test starts; plus the
config path. Every fetch of the loopback server lists it explicitly (``allowed_networks``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.support.loopback import serving
from toolkeeper import Activation, Agent, Profile
from toolkeeper.api import create_app
from toolkeeper.builtins import definition
from toolkeeper.builtins.web_fetch import WebFetchTool
from toolkeeper.config.apply import apply_file
from toolkeeper.errors import ConfigError
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import Risk, SideEffect

LOOPBACK = {"allowed_networks": ["127.0.0.1/32"]}
_RELEASE = threading.Event()
_STREAMED: list[int] = []
_NAV = "Home News Sport Weather Contact us Sign in"
_FOOTER = "Copyright 2026 Example Media Group. All rights reserved. Privacy policy."
_PARAGRAPHS = [
    "The river authority opened the new flood barrier on Tuesday after four years of work, "
    "and engineers said the structure would protect nine thousand homes downstream.",
    "Residents who had lived through the floods of last winter gathered on the embankment "
    "to watch the gates close for the first time, some of them carrying photographs.",
    "The project cost far more than the first estimate, a point the council's critics made "
    "again this week, but the authority says maintenance will be cheaper than repairs.",
    "Further work on the northern bank is planned for next spring, when the water is low "
    "enough for the crews to reach the old sluices without pumping out the channel.",
]
ARTICLE = f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<title>Flood barrier opens | Example News</title><script>var tracking = 1;</script></head>
<body><header><nav><ul>{"".join(f'<li><a href="/{w.lower()}">{w}</a></li>'
                                 for w in _NAV.split())}</ul></nav></header>
<main><article><h1>Flood barrier opens</h1>
{"".join(f"<p>{p}</p>" for p in _PARAGRAPHS[:2])}
<p>Read the <a href="report.html">engineering report</a> or the
<a href="https://council.example/minutes">council minutes</a>.</p>
{"".join(f"<p>{p}</p>" for p in _PARAGRAPHS[2:])}
</article></main>
<footer><p>{_FOOTER}</p><a href="mailto:desk@example.com">Mail us</a>
<a href="javascript:void(0)">Top</a></footer></body></html>"""
CAFE = "Café crème \u2013 \u201cquoted\u201d naïve"  # dash, quotes: windows-1252 only


def _html(body: str, head: str = "") -> str:
    return f"<html><head>{head}<title>T</title></head><body><p>{body}</p></body></html>"


class _Handler(BaseHTTPRequestHandler):
    def _reply(self, status: int, body: bytes | str, ctype: str | None = "text/html") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        if ctype is not None:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        path = url.path
        if path in ("/", "/article"):
            self._reply(200, ARTICLE, "text/html; charset=utf-8")
        elif path == "/plain":
            self._reply(200, "line one\n  line two\n", "text/plain")
        elif path == "/json":
            self._reply(200, '{"items": [1, 2], "name": "x"}', "application/json")
        elif path == "/pdf":
            self._reply(200, b"%PDF-1.7\n" + b"\x00" * 100, "application/pdf")
        elif path == "/latin1":
            self._reply(200, _html(CAFE).encode("cp1252"), "text/html; charset=ISO-8859-1")
        elif path == "/meta":
            page = _html(CAFE, '<meta http-equiv="Content-Type" '
                               'content="text/html; charset=windows-1252">')
            self._reply(200, page.encode("cp1252"), "text/html")
        elif path == "/utf8":
            self._reply(200, _html(CAFE + " 日本語").encode("utf-8"), "text/html")
        elif path == "/undeclared":
            text = (CAFE + ". Le café est servi très chaud à la terrasse, près de l'église.\n") * 8
            self._reply(200, text.encode("cp1252"), None)
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/loop":
            n = int(query.get("n", ["0"])[0])
            self.send_response(302)
            self.send_header("Location", f"/loop?n={n + 1}")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/endless":
            self._endless()
        elif path.startswith("/status/"):
            self._reply(int(path.rsplit("/", 1)[1]), _html("Not here"))
        elif path == "/slow":
            _RELEASE.wait(5)
            self._reply(200, "late", "text/plain")
        else:
            self._reply(404, _html("no route"))

    def _endless(self) -> None:
        """A text body that never ends (until the client hangs up or 64 MiB)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        sent = 0
        try:
            while sent < 64 << 20:
                self.wfile.write(b"x" * 65536)
                sent += 65536
        except OSError:
            pass
        _STREAMED.append(sent)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _RELEASE.clear()
    _STREAMED.clear()
    with serving(_Handler) as url:
        yield url
        _RELEASE.set()


@pytest.fixture
def gw(db_url: str) -> Iterator[Gateway]:
    with Gateway.open(db_url) as gateway:
        gateway.registry.register(definition("web_fetch"))
        gateway.registry.put_agent(Agent(name="bot", profile="reader", tenant_id="default"),
                                   replace=True)
        yield gateway


def fetch(gw: Gateway, url: str | dict[str, Any], **policy: Any) -> CallResult:
    """Call ``web_fetch`` as agent ``bot``, whose profile activates it with ``policy``."""
    gw.registry.put_profile(Profile(name="reader", tenant_id="default", autonomy=3,
                                    activations=[Activation(tool="web_fetch", policy=policy)]),
                            replace=True)
    return gw.call_sync("web_fetch", arguments={"url": url} if isinstance(url, str) else url,
                        agent="bot")


def refused(result: CallResult, reason: str) -> None:
    assert not result.ok, result
    assert result.reason == reason, result
    assert result.output is None


def test_html_page_gives_title_main_text_and_absolute_links(gw: Gateway, server: str) -> None:
    result = fetch(gw, server + "/article", **LOOPBACK)
    assert result.ok, result
    out = result.output
    assert (out["status"], out["content_type"], out["truncated"]) == (200, "text/html", False)
    assert out["url"] == out["final_url"] == server + "/article"
    assert out["title"] == "Flood barrier opens | Example News"
    for paragraph in _PARAGRAPHS:
        assert paragraph in out["text"]
    assert "Sign in" not in out["text"] and "All rights reserved" not in out["text"]
    assert "tracking" not in out["text"]
    links = {link["href"]: link["text"] for link in out["links"]}
    assert links[server + "/report.html"] == "engineering report"
    assert links["https://council.example/minutes"] == "council minutes"
    assert links[server + "/news"] == "News"
    assert not [h for h in links if not h.startswith(("http://", "https://"))]


def test_plain_text_and_json_pass_through(gw: Gateway, server: str) -> None:
    plain = fetch(gw, server + "/plain", **LOOPBACK).output
    assert plain["text"] == "line one\n  line two\n"
    assert (plain["content_type"], plain["title"], plain["links"]) == ("text/plain", None, [])
    data = fetch(gw, server + "/json", **LOOPBACK).output
    assert data["content_type"] == "application/json"
    assert json.loads(data["text"]) == {"items": [1, 2], "name": "x"}


@pytest.mark.parametrize(("path", "expected"), [
    ("/latin1", CAFE),  # Content-Type charset=ISO-8859-1, read as browsers do: windows-1252
    ("/meta", CAFE),  # only a <meta http-equiv> charset
    ("/utf8", CAFE + " 日本語"),  # undeclared UTF-8
    ("/undeclared", CAFE),  # no Content-Type at all: sniffed as text, windows-1252 detected
])
def test_charset_from_header_meta_or_detection(
        gw: Gateway, server: str, path: str, expected: str) -> None:
    result = fetch(gw, server + path, **LOOPBACK)
    assert result.ok, result
    assert expected in result.output["text"]
    assert "\ufffd" not in result.output["text"]


def test_redirects_are_followed_and_every_hop_is_checked(gw: Gateway, server: str) -> None:
    port = httpx.URL(server).port
    ok = fetch(gw, f"{server}/redirect?to=/plain", **LOOPBACK)
    assert ok.ok and ok.output["final_url"] == server + "/plain", ok
    assert ok.output["url"] == f"{server}/redirect?to=/plain"
    hops = {  # target of the redirect -> the reason it is refused at the hop
        "http://169.254.169.254/latest/meta-data/": "address_not_allowed",
        f"http://127.0.0.2:{port}/plain": "address_not_allowed",  # not in allowed_networks
        f"http://10.1.2.3:{port}/plain": "address_not_allowed",
        f"http://blocked.test:{port}/plain": "host_not_allowed",  # denied_hosts, pre-DNS
        f"http://[::ffff:127.0.0.2]:{port}/plain": "address_not_allowed",
    }
    for target, reason in hops.items():
        refused(fetch(gw, f"{server}/redirect?to={target}", denied_hosts=["*.test"],
                      **LOOPBACK), reason)


def test_denied_and_unlisted_hosts_are_refused_before_any_request(
        gw: Gateway, server: str) -> None:
    refused(fetch(gw, server + "/plain"), "address_not_allowed")  # loopback not listed
    refused(fetch(gw, server + "/plain", denied_hosts=["127.0.0.1"], **LOOPBACK),
            "host_not_allowed")
    refused(fetch(gw, server + "/plain", allowed_hosts=["docs.example.org"], **LOOPBACK),
            "host_not_allowed")
    # a denial wins over a listing
    refused(fetch(gw, "https://www.example.org/", allowed_hosts=["*.example.org"],
                  denied_hosts=["www.example.org"]), "host_not_allowed")
    refused(fetch(gw, "http://metadata.google.internal/"), "address_not_allowed")


def test_every_resolved_address_is_checked(db_url: str) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.20.30.40"]  # one public answer does not excuse the other

    with Gateway.open(db_url) as gw:
        gw.registry.register(WebFetchTool(resolver=resolve))
        gw.registry.put_agent(Agent(name="bot", profile="reader", tenant_id="default"),
                              replace=True)
        refused(fetch(gw, "http://public.example/"), "address_not_allowed")


def test_unsupported_content_type_is_refused(gw: Gateway, server: str) -> None:
    result = fetch(gw, server + "/pdf", **LOOPBACK)
    refused(result, "unsupported_content_type")
    assert "application/pdf" in (result.message or "")


def test_byte_cap_stops_reading_an_endless_body(gw: Gateway, server: str) -> None:
    result = fetch(gw, server + "/endless", max_bytes=100_000, **LOOPBACK)
    assert result.ok, result
    assert result.output["truncated"] is True
    assert result.output["text"] == "x" * 50_000  # then cut to max_text_chars' default
    deadline = time.monotonic() + 10
    while not _STREAMED and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _STREAMED and _STREAMED[0] < 64 << 20  # the client hung up long before the end


def test_output_chars_are_capped_by_policy_and_by_the_caller(gw: Gateway, server: str) -> None:
    result = fetch(gw, server + "/article", max_text_chars=120, **LOOPBACK)
    assert len(result.output["text"]) == 120 and result.output["truncated"] is True
    # the pipeline's cap on the whole result: text, then links, give way; JSON stays whole
    whole = fetch(gw, server + "/article", max_output_chars=900, **LOOPBACK)
    assert isinstance(whole.output, dict) and whole.output["truncated"] is True, whole
    assert len(json.dumps(whole.output, ensure_ascii=False)) <= 900
    full = fetch(gw, server + "/article", **LOOPBACK).output["text"]
    assert full.startswith(whole.output["text"]) and len(whole.output["text"]) < len(full)
    assert whole.output["title"] == "Flood barrier opens | Example News"
    fetch(gw, server + "/plain", max_text_chars=300, **LOOPBACK)
    asked = gw.call_sync("web_fetch", arguments={"url": server + "/plain", "max_chars": 4},
                         agent="bot")
    assert asked.output["text"] == "line" and asked.output["truncated"] is True
    more = gw.call_sync("web_fetch", arguments={"url": server + "/article", "max_chars": 10_000},
                        agent="bot")
    assert len(more.output["text"]) == 300  # the policy's cap wins over the caller's


def test_redirect_cap(gw: Gateway, server: str) -> None:
    result = fetch(gw, server + "/loop", max_redirects=3, **LOOPBACK)
    refused(result, "upstream_error")
    assert "more than 3 redirects" in (result.message or "")
    refused(fetch(gw, f"{server}/redirect?to=/plain", max_redirects=0, **LOOPBACK),
            "upstream_error")


def test_slow_server_times_out(gw: Gateway, server: str) -> None:
    refused(fetch(gw, server + "/slow", timeout_s=0.3, **LOOPBACK), "timeout")


def test_client_error_page_is_a_result_and_server_error_is_retryable(
        gw: Gateway, server: str) -> None:
    missing = fetch(gw, server + "/status/404", **LOOPBACK)
    assert missing.ok and missing.output["status"] == 404
    assert "Not here" in missing.output["text"]
    refused(fetch(gw, server + "/status/503", **LOOPBACK), "upstream_error")


@pytest.mark.parametrize("arguments", [
    {}, {"url": ""}, {"url": 5}, {"url": "http://x.example/", "extra": 1},
    {"url": "http://x.example/", "max_chars": 0},
])
def test_invalid_arguments_are_refused(gw: Gateway, arguments: dict[str, Any]) -> None:
    refused(fetch(gw, arguments), "invalid_arguments")


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd",
                                 "http://user:pw@example.com/", "not a url"])
def test_urls_the_guard_refuses(gw: Gateway, url: str) -> None:
    refused(fetch(gw, url), "address_not_allowed")


def test_definition_is_pure_and_low_risk() -> None:
    d = WebFetchTool.definition()
    assert d.name == "web_fetch"
    assert d.action_side_effect("run") is SideEffect.PURE and d.risk_default is Risk.LOW
    assert d.action_input_schema("run")["required"] == ["url"]


CONFIG = """\
version: 1
tools:
  - builtin: web_fetch
    policy: {policy}
profiles:
  - {{name: reader, autonomy: 3, activations: [{{tool: web_fetch}}]}}
agents:
  - {{name: bot, profile: reader}}
"""


def test_config_installs_web_fetch_and_refuses_bad_policy_values(
        db_url: str, server: str, tmp_path: Path) -> None:
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(policy='{allowed_networks: ["127.0.0.1/32"], '
                                         "max_text_chars: 8}"))
    with Gateway.open(db_url, config=path) as gw:
        result = gw.call_sync("web_fetch", arguments={"url": server + "/plain"}, agent="bot")
        assert result.ok and result.output["text"] == "line one", result
    for bad in ("{max_bytes: 0}", "{allowed_networks: [nope]}", "{denied_host: [x]}"):
        path.write_text(CONFIG.format(policy=bad))
        with Gateway.open(db_url) as gw, pytest.raises(ConfigError):
            apply_file(gw, path)


def test_tenant_over_rest_may_list_networks_only_within_the_operators_ceiling(
        db_url: str, server: str) -> None:
    with Gateway.open(db_url, tenant_bounds={"networks": ["127.0.0.0/8"]}) as gw:
        gw.registry.register(definition("web_fetch"))
        gw.registry.put_profile(Profile(name="team", tenant_id="default", autonomy=3), replace=True)
        gw.registry.put_agent(Agent(name="bot", profile="team", tenant_id="default"), replace=True)
        admin = gw.store.tokens.create(tenant_id="default", role="admin")[1]
        with TestClient(create_app(gw)) as client:
            def activate(policy: dict[str, Any]) -> httpx.Response:
                return client.post("/activations", headers={"Authorization": f"Bearer {admin}"},
                                   json={"profile": "team", "tool": "web_fetch",
                                         "policy": policy})

            wide = activate({"allowed_networks": ["10.0.0.0/8"]})
            assert wide.status_code == 422, wide.text
            assert wide.json()["error"]["reason"] == "policy_exceeds_bounds"
            assert activate({**LOOPBACK, "denied_hosts": ["*.internal"]}).status_code == 200
        result = gw.call_sync("web_fetch", arguments={"url": server + "/plain"}, agent="bot")
        assert result.ok and result.output["text"].startswith("line one"), result
