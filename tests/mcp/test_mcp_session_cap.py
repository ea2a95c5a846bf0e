"""Many idle clients, bounded (issue 32 part 5): past ``mcp_max_sessions`` open sessions a
new one is refused with 503 and ``Retry-After``; the sessions already open go on."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from mcp_fixtures import McpServer, serving

from toolkeeper.mcp import sessions

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-11-25"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "idle", "version": "0"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('cap')}/tk.db",
                 mcp_max_sessions=2) as s:
        yield s


def _open(srv: McpServer) -> httpx.Response:
    auth = {"Authorization": f"Bearer {srv.tokens['bot']}"}
    return httpx.post(srv.url, headers={**HEADERS, **auth}, json=INIT, timeout=10)


def test_past_the_cap_a_new_session_is_503_with_retry_after(srv: McpServer) -> None:
    opened = [_open(srv) for _ in range(2)]
    assert [r.status_code for r in opened] == [200, 200]
    refused = _open(srv)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == str(sessions.FULL_RETRY_AFTER_S)
    sid = opened[0].headers["mcp-session-id"]
    auth = {"Authorization": f"Bearer {srv.tokens['bot']}", "Mcp-Session-Id": sid}
    again = httpx.post(srv.url, headers={**HEADERS, **auth}, json=LIST, timeout=10)
    assert again.status_code == 200 and "add" in again.text  # open sessions go on


def test_serve_takes_the_cap_from_its_environment() -> None:
    from toolkeeper.errors import ConfigError
    from toolkeeper.server import ServerSettings

    assert ServerSettings.load({}).mcp_max_sessions == 10_000
    assert ServerSettings.load({"TOOLKEEPER_MCP_MAX_SESSIONS": "7"}).mcp_max_sessions == 7
    with pytest.raises(ConfigError):
        ServerSettings.load({"TOOLKEEPER_MCP_MAX_SESSIONS": "0"})
