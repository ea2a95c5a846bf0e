"""What ``toolkeeper serve`` prints at start is true: every address it names answers, and
the way back from a lost admin token is named at every start, the first included."""

from __future__ import annotations

import io
import re
from pathlib import Path

import httpx
import pytest

from tests.support.serve import serving_demo
from toolkeeper.server import ServerSettings, announce, build

URL = re.compile(r"https?://[^\s)]+")
RECOVERY = "toolkeeper tokens create --role admin --local"
TOKEN = re.compile(r"^  demo agent token \(billing-bot\): (tk_\S+)$", re.M)


def _banner(tmp_path: Path, **flags: object) -> str:
    settings = ServerSettings.load({}, database_url=f"sqlite:///{tmp_path}/tk.db",
                                   secrets_backend="env", **flags)
    server = build(settings)
    text = io.StringIO()
    try:
        announce(server, text)
    finally:
        server.close()
    return text.getvalue()


def test_the_server_root_is_an_index_of_what_it_serves(db_url: str) -> None:
    from tests.api.exec_fixtures import api_for

    with api_for(db_url) as api:
        resp = api.client.get("/")
        assert resp.status_code == 200, resp.text
        index = resp.json()
        assert index["name"] == "toolkeeper"
        for name in ("console", "docs", "openapi", "mcp", "health", "ready"):
            assert api.client.get(index[name]).status_code in (200, 401), name  # mcp: 401


def test_the_recovery_command_is_named_at_every_start_the_first_included(
        tmp_path: Path) -> None:
    first = _banner(tmp_path)
    assert "tokens created now" in first and RECOVERY in first
    again = _banner(tmp_path)
    assert "tokens created now" not in again and RECOVERY in again


def test_the_first_start_says_which_key_keyed_the_audit_chains(tmp_path: Path) -> None:
    key_file = tmp_path / "tk.db.audit-key"
    first = _banner(tmp_path)
    assert (f"this store's audit chains are now keyed with the key file {key_file} (made for "
            f"this store); "
            f"every process opening it needs that key (TOOLKEEPER_AUDIT_KEY_FILE={key_file})"
            ) in first
    assert "audit chains are now keyed" not in _banner(tmp_path)


def _mcp_answers(url: str, token: str) -> int:
    """An MCP ``initialize``, as a client given the banner's MCP address sends it."""
    return httpx.post(url, timeout=10, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "banner-test", "version": "1"}}},
        headers={"Authorization": f"Bearer {token}",
                 "Accept": "application/json, text/event-stream"}).status_code


@pytest.mark.slow  # a real `serve --demo`: 3 to 15 s on a shared machine
def test_every_address_the_demo_banner_prints_answers(tmp_path: Path) -> None:
    """``make run``'s server (``serve --demo`` over ``./toolkeeper.db``): each URL in what
    it printed is fetched and answers 2xx or 3xx; ``/mcp`` as an MCP client with the
    demo agent's token (the banner says it takes agent tokens)."""
    with serving_demo(tmp_path) as (port, log):
        text = log.read_text()
        urls = sorted(set(URL.findall(text)))
        assert f"http://127.0.0.1:{port}/" in urls and len(urls) >= 5, text
        agent = TOKEN.search(text)
        assert agent is not None and RECOVERY in text, text
        for url in urls:
            if url.endswith("/mcp"):
                status = _mcp_answers(url, agent.group(1))
            else:
                status = httpx.get(url, timeout=10).status_code
            assert 200 <= status < 400, f"the banner names {url}; it answers {status}"
