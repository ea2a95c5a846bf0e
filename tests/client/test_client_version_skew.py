"""The client against an older or a newer server (issue 29 "Bad input"; docs/guides/client.md
"Versions"): every answer of ``serve`` names its version in ``X-Toolkeeper-Version``; a server
older than ``MIN_SERVER_VERSION`` is refused with an error naming both versions; a newer
server's unknown fields are ignored and an older server's missing ones take defaults.

The older and newer servers are loopback HTTP servers answering canned JSON in the shapes a
server of that version would send (the real server of this checkout is the current one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from tests.client.conftest import Server
from tests.support.loopback import serving
from toolkeeper.client import MIN_SERVER_VERSION, Client, ServerTooOld, _core
from toolkeeper.model.enums import CallStatus, Risk
from toolkeeper.model.reasons import Reason
from toolkeeper.model.wire import VERSION_HEADER
from toolkeeper.version import __version__

pytestmark = pytest.mark.slow  # a real server or loopback peer: CI and `make test-all`

TS = "2026-01-01T00:00:00+00:00"


def canned(routes: Mapping[str, tuple[int, object]],
           version: str | None) -> type[BaseHTTPRequestHandler]:
    """A handler answering ``"METHOD /path"`` from ``routes`` (404 otherwise), naming
    ``version`` in the version header (no header when ``None``, as a proxy's page)."""

    class Canned(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body = routes.get(f"{self.command} {self.path.split('?')[0]}",
                                      (404, {"error": {"reason": "not_found",
                                                       "message": "no route"}}))
            data = json.dumps(body).encode()
            self.send_response(status)
            if version is not None:
                self.send_header(VERSION_HEADER, version)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    return Canned


RESULT = {"call_id": "c1", "status": "succeeded", "tool": "echo", "output": 7}
APPROVAL = {"id": "ap_1", "kind": "approve", "status": "pending"}


# the server names its version -------------------------------------------------------------

def test_every_answer_of_serve_names_its_version(server: Server) -> None:
    """Successes, refusals, unknown routes and the shortcuts outside the REST stack."""
    answers = []
    with httpx.Client(base_url=server.url, timeout=10) as http:
        answers += [http.get("/healthz"), http.get("/readyz"), http.get("/"),
                    http.get("/openapi.json"), http.get("/no/such/route"),
                    http.get("/approvals"),  # no token: 401
                    http.post("/tools/execute", json={"tool": "echo"},
                              headers={"Authorization": "Bearer tk_not-a-token"}),
                    http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})]
        token = {"Authorization": f"Bearer {server.tokens['worker-bot']}"}
        answers.append(http.post("/tools/execute", headers=token,
                                 json={"tool": "echo", "arguments": {"n": 1}}))
    assert {r.status_code for r in answers} >= {200, 401, 404}
    assert [r.headers.get(VERSION_HEADER) for r in answers] == [__version__] * len(answers)


# too old ----------------------------------------------------------------------------------

def test_a_server_older_than_the_oldest_supported_is_refused_naming_both() -> None:
    handler = canned({"POST /tools/execute": (200, RESULT),
                      "GET /approvals/ap_1": (200, APPROVAL)}, "0.0.9")
    with serving(handler) as url, Client(url, "tk_x", timeout=5) as tk:
        with pytest.raises(ServerTooOld) as info:
            tk.execute("echo", {"n": 7})
        with pytest.raises(ServerTooOld):
            tk.approvals.get("ap_1")
    message = str(info.value)
    assert "version 0.0.9" in message and url in message
    assert f"toolkeeper-client {__version__}" in message
    assert f"version {MIN_SERVER_VERSION} or newer" in message
    assert (info.value.server_version, info.value.minimum) == ("0.0.9", MIN_SERVER_VERSION)


def test_versions_compare_as_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.10 is newer than 0.9 (as text it is not); a pre-release counts as its release."""
    monkeypatch.setattr(_core, "MIN_SERVER_VERSION", "0.9.0")
    for version in ("0.10.0", "0.9.0rc1", "1.0"):
        with serving(canned({"POST /tools/execute": (200, RESULT)}, version)) as url, \
                Client(url, "tk_x", timeout=5) as tk:
            assert tk.execute("echo", {"n": 7}).ok, version
    with serving(canned({"POST /tools/execute": (200, RESULT)}, "0.8.12")) as url, \
            Client(url, "tk_x", timeout=5) as tk, pytest.raises(ServerTooOld):
        tk.execute("echo", {"n": 7})


def test_an_answer_without_the_version_is_not_judged() -> None:
    """A proxy's own page, or a server before the header existed: read as it is."""
    with serving(canned({"POST /tools/execute": (200, RESULT)}, None)) as url, \
            Client(url, "tk_x", timeout=5) as tk:
        assert tk.execute("echo", {"n": 7}).output == 7


# newer: unknown fields ignored -------------------------------------------------------------

NEW = {"added_in_a_later_release": {"any": "thing"}}


def test_a_newer_servers_new_fields_and_values_are_read_past() -> None:
    approval = {**APPROVAL, **NEW, "status": "approved", "agent": "bot", "tool": "pay",
                "preview": {"summary": "pay 5", "data": {"amount": 5}, **NEW},
                "created_at": TS, "expires_at": TS}
    routes: dict[str, tuple[int, object]] = {
        "POST /tools/execute": (200, {**RESULT, **NEW, "reason": "a_reason_added_later",
                                      "risk": "catastrophic", "gate": "ask_the_board"}),
        "GET /approvals/ap_1": (200, approval),
        "GET /calls/c1": (200, {"call_id": "c1", "tool": "echo", "state": "archived",
                                "created_at": TS, **NEW}),
        "GET /audit": (200, {"events": [{"seq": 1, "event_id": "e1", "ts": TS,
                                         "type": "tool.teleported", **NEW}],
                             "next_cursor": None, **NEW}),
        "GET /discovery/agents/bot/enabled": (200, {"agent": "bot", "profile": "p", **NEW,
                                                    "tools": [{"name": "echo", **NEW}]}),
    }
    with serving(canned(routes, "99.1.0")) as url, Client(url, "tk_x", timeout=5) as tk:
        res = tk.execute("echo", {"n": 7})
        got = tk.approvals.get("ap_1")
        outcome = tk.calls.get("c1")
        page = tk.audit.list()
        tools = tk.discovery.enabled("bot")
    assert res.status is CallStatus.SUCCEEDED and res.output == 7
    assert res.reason == "a_reason_added_later" and res.risk is None and res.gate is None
    assert (got.status, got.agent, got.decided) == ("approved", "bot", True)
    assert got.preview is not None and got.preview.data == {"amount": 5}
    assert "added_in_a_later_release" not in got.model_dump()
    assert (outcome.state, outcome.created_at) == ("archived", TS)
    assert [e.type for e in page.events] == ["tool.teleported"]
    assert [t.name for t in tools.tools] == ["echo"]


# older: missing fields defaulted -----------------------------------------------------------

def test_an_older_servers_missing_fields_take_defaults() -> None:
    routes: dict[str, tuple[int, object]] = {
        "GET /approvals/ap_1": (200, APPROVAL),
        "GET /calls/c1": (200, {"call_id": "c1", "tool": "echo"}),
        "GET /audit": (200, {"events": [{"seq": 1, "event_id": "e1", "ts": TS,
                                         "type": "tool.succeeded"}]}),
        "GET /audit/verify": (200, {"ok": True}),
        "POST /tools/execute": (200, {"call_id": "c2", "status": "denied", "tool": "echo",
                                      "reason": "gate_denied"}),
    }
    with serving(canned(routes, MIN_SERVER_VERSION)) as url, \
            Client(url, "tk_x", timeout=5) as tk:
        got = tk.approvals.get("ap_1")
        outcome = tk.calls.get("c1")
        page = tk.audit.list()
        verified = tk.audit.verify()
        res = tk.execute("echo", {"n": 7})
    assert (got.id, got.status, got.decided, got.preview, got.decided_by) == \
        ("ap_1", "pending", False, None, None)
    assert (got.agent, got.arguments, got.expires_at) == ("", None, "")
    assert (outcome.tool, outcome.result, outcome.state) == ("echo", None, "")
    assert page.next_cursor is None and page.events[0].data == {}
    assert (verified.ok, verified.events, verified.problems, verified.first_seq) == \
        (True, 0, [], 1)
    assert res.status is CallStatus.DENIED and res.reason is Reason.GATE_DENIED
    assert res.risk is None and not res.deduped


def test_a_known_risk_still_reads_as_the_enum() -> None:
    body = {**RESULT, "risk": "high", "gate": "approve"}
    with serving(canned({"POST /tools/execute": (200, body)}, __version__)) as url, \
            Client(url, "tk_x", timeout=5) as tk:
        res = tk.execute("echo", {"n": 7})
    assert res.risk is Risk.HIGH and res.gate is not None and res.gate.value == "approve"
