"""The client's bounded retries against a loopback server that answers what the test
scripts (503 with ``Retry-After``, then a result): retried within the budget, given up
with ``unavailable`` beyond it, never re-sent where a second send could act twice."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from tests.support.loopback import JsonHandler, serving
from toolkeeper.client import Client, ServerUnavailable
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`

BUSY = {"error": {"reason": "not_ready", "message": "busy", "details": {}}}
RESULT = {"call_id": "c1", "status": "succeeded", "tool": "echo", "output": 7}


def scripted(answers: list[tuple[int, object]]) -> tuple[type[BaseHTTPRequestHandler],
                                                          list[str]]:
    """A handler answering ``answers`` in turn (the last one from then on), and the list
    of request paths it saw."""
    seen: list[str] = []

    class Scripted(JsonHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            seen.append(f"{self.command} {self.path.split('?')[0]}")
            status, body = answers[min(len(seen), len(answers)) - 1]
            if status == 503:
                data = json.dumps(body).encode()
                self.send_response(503)
                self.send_header("Retry-After", "0")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self.reply(body, status)

        do_GET = do_POST = _answer

    return Scripted, seen


def test_a_503_with_retry_after_is_retried_then_answered() -> None:
    handler, seen = scripted([(503, BUSY), (503, BUSY), (200, RESULT)])
    with serving(handler) as url, Client(url, "tk_x", timeout=5, max_retries=3) as tk:
        res = tk.execute("echo", {"n": 7})
    assert res.status is CallStatus.SUCCEEDED and res.output == 7
    assert seen == ["POST /tools/execute"] * 3


def test_503_on_every_attempt_gives_up_with_unavailable() -> None:
    handler, seen = scripted([(503, BUSY)])
    with serving(handler) as url, Client(url, "tk_x", timeout=5, max_retries=2) as tk:
        res = tk.execute("echo", {"n": 7})
        assert res.status is CallStatus.FAILED  # a 503 took nothing
        assert res.reason is Reason.UNAVAILABLE and "not_ready" in (res.message or "")
        with pytest.raises(ServerUnavailable) as info:
            tk.approvals.get("ap_1")
    assert info.value.reason == Reason.UNAVAILABLE and not info.value.may_have_applied
    assert len(seen) == 6  # three attempts each, no more


def test_an_approval_whose_answer_is_lost_is_not_sent_again() -> None:
    seen: list[str] = []

    class HangUp(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.close_connection = True  # no answer at all

        def log_message(self, *args: object) -> None:
            pass

    with serving(HangUp) as url, Client(url, "tk_x", timeout=5, max_retries=3) as tk, \
            pytest.raises(ServerUnavailable) as info:
        tk.approvals.approve("ap_1")
    assert info.value.reason == Reason.UNAVAILABLE and info.value.may_have_applied
    assert seen == ["/approvals/ap_1/approve"]
