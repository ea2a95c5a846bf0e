"""``toolkeeper.client.Client`` against a real ``toolkeeper serve`` (issue 9, item 1):
execute returns the library's results; call_or_raise raises the library's families;
approvals resolve and the re-executed call runs once; 429 ``Retry-After`` honoured within
the budget; a down server gives ``unavailable`` after a bounded wait."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.client.conftest import Server, free_port
from toolkeeper.client import Client, RequestRefused, ServerUnavailable
from toolkeeper.errors import ApprovalRequired, CallDenied, CallFailed
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`


def _client(server: Server, who: str, **kw: object) -> Client:
    return Client(server.url, server.tokens[who], timeout=10, **kw)  # type: ignore[arg-type]


def _sink(server: Server) -> Path:
    return server.work / f"sink-{uuid.uuid4().hex}.txt"


def test_an_allowed_call_returns_the_library_result(server: Server) -> None:
    sink = _sink(server)
    with _client(server, "worker-bot") as tk:
        res = tk.execute("stamp", {"mark": "a", "path": str(sink)})
    assert isinstance(res, CallResult)
    assert res.status is CallStatus.SUCCEEDED and res.output == {"stamped": "a"}
    assert res.idempotency_key and res.idempotency_key.startswith("tkc-")
    assert sink.read_text() == "a\n"


def test_a_denied_call_returns_its_reason_and_raises_call_denied(server: Server) -> None:
    with _client(server, "worker-bot") as tk:
        res = tk.execute("pay", {"invoice": "X", "path": "/nonexistent"})
        assert res.status is CallStatus.DENIED and res.reason is Reason.TOOL_NOT_ENABLED
        with pytest.raises(CallDenied) as info:
            tk.call_or_raise("pay", {"invoice": "X", "path": "/nonexistent"})
    assert info.value.reason == Reason.TOOL_NOT_ENABLED


def test_invalid_arguments_come_back_as_a_result_with_pointers(server: Server) -> None:
    with _client(server, "worker-bot") as tk:
        res = tk.execute("echo", {"n": "not a number"})
    assert res.status is CallStatus.DENIED and res.reason is Reason.INVALID_ARGUMENTS
    assert res.details and res.details["errors"][0]["pointer"] == "/n"


def test_approval_then_the_same_key_executes_exactly_once(server: Server) -> None:
    sink, key = _sink(server), f"pay-{uuid.uuid4().hex}"
    args = {"invoice": "INV-7", "path": str(sink)}
    with _client(server, "pay-bot") as bot, _client(server, "approver") as approver:
        with pytest.raises(ApprovalRequired) as info:
            bot.call_or_raise("pay", args, idempotency_key=key)
        approval_id = info.value.result.approval_id
        assert approval_id and info.value.reason == Reason.APPROVAL_REQUIRED
        with pytest.raises(RequestRefused) as refused:  # the agent may not approve itself
            bot.approvals.approve(approval_id)
        assert refused.value.reason == Reason.APPROVER_NOT_ALLOWED
        assert refused.value.status_code == 403
        assert [a.id for a in approver.approvals.list()].count(approval_id) == 1
        assert approver.approvals.approve(approval_id, note="ok").status == "approved"
        first = bot.execute("pay", args, idempotency_key=key, approval_id=approval_id)
        again = bot.execute("pay", args, idempotency_key=key, approval_id=approval_id)
    assert first.status is CallStatus.SUCCEEDED and not first.deduped
    assert again.status is CallStatus.SUCCEEDED and again.deduped
    assert again.call_id == first.call_id
    assert sink.read_text() == "INV-7\n"  # the tool ran once


def test_a_denied_approval_stops_the_call(server: Server) -> None:
    args = {"invoice": "INV-8", "path": str(_sink(server))}
    with _client(server, "pay-bot") as bot, _client(server, "approver") as approver:
        pending = bot.execute("pay", args)
        assert pending.status is CallStatus.APPROVAL_REQUIRED and pending.approval_id
        assert approver.approvals.deny(pending.approval_id, note="no").status == "denied"
        assert bot.approvals.get(pending.approval_id).decided
        res = bot.execute("pay", args, approval_id=pending.approval_id)
    assert res.status is CallStatus.DENIED and res.reason is Reason.APPROVAL_DENIED


def test_retry_after_is_honoured_within_the_budget(server: Server) -> None:
    with _client(server, "burst-bot", max_wait_s=10) as tk:
        results = [tk.execute("echo", {"n": i}) for i in range(3)]
    # the limit is one call per second: the later calls waited for it instead of failing
    assert [r.status for r in results] == [CallStatus.SUCCEEDED] * 3
    assert [r.output for r in results] == [0, 1, 2]


def test_a_retry_after_beyond_the_budget_returns_rate_limited_at_once(server: Server) -> None:
    with _client(server, "capped-bot", max_wait_s=2) as tk:
        assert tk.execute("echo", {"n": 1}).ok
        res = tk.execute("echo", {"n": 2})
        assert res.status is CallStatus.DENIED and res.reason is Reason.RATE_LIMITED
        assert res.retry_after is not None and res.retry_after > 2
        with pytest.raises(CallDenied) as info:
            tk.call_or_raise("echo", {"n": 3})
    assert info.value.reason == Reason.RATE_LIMITED


def test_a_down_server_gives_unavailable_after_a_bounded_wait() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with Client(url, "tk_nobody", timeout=2, max_retries=2, max_wait_s=1) as tk:
        res = tk.execute("stamp", {"mark": "x", "path": "/tmp/x"})
        assert res.status is CallStatus.FAILED and res.reason is Reason.UNAVAILABLE
        assert url in (res.message or "")
        with pytest.raises(CallFailed) as failed:
            tk.call_or_raise("stamp", {"mark": "x", "path": "/tmp/x"})
        assert failed.value.reason == Reason.UNAVAILABLE
        with pytest.raises(ServerUnavailable) as info:
            tk.approvals.list()
        assert info.value.reason == Reason.UNAVAILABLE and not info.value.may_have_applied
        batch = tk.execute_batch([{"tool": "echo", "arguments": {"n": 1}}])
    assert [r.reason for r in batch] == [Reason.UNAVAILABLE]


def test_an_unknown_token_is_refused_unauthenticated(server: Server) -> None:
    with Client(server.url, "tk_not-a-token", timeout=10) as tk:
        res = tk.execute("echo", {"n": 1})
        assert res.status is CallStatus.DENIED and res.reason is Reason.UNAUTHENTICATED
        with pytest.raises(RequestRefused) as info:
            tk.approvals.list()
    assert info.value.reason == Reason.UNAUTHENTICATED and info.value.status_code == 401


def test_discovery_lists_enabled_and_unavailable_tools_with_schemas(server: Server) -> None:
    with _client(server, "worker-bot") as tk, _client(server, "admin") as admin:
        enabled = tk.discovery.enabled("worker-bot")
        unavailable = admin.discovery.unavailable("worker-bot")  # the tenant's tools
    by_name = {t.name: t for t in enabled.tools}
    assert set(by_name) == {"stamp", "echo"} and enabled.profile == "worker"
    assert by_name["echo"].input_schemas["run"]["properties"]["n"]["type"] == "integer"
    assert {t.name: t.why_unavailable for t in unavailable.tools}["pay"] == \
        "disabled_for_agent"


def test_batch_calls_supersede_and_audit(server: Server) -> None:
    sink = _sink(server)
    turn = f"turn-{uuid.uuid4().hex}"
    with _client(server, "worker-bot") as bot, _client(server, "admin") as admin:
        results = bot.execute_batch([
            {"tool": "echo", "arguments": {"n": 5}},
            {"tool": "stamp", "arguments": {"mark": "b", "path": str(sink)},
             "turn_group_id": turn}])
        assert [r.output for r in results] == [5, {"stamped": "b"}]
        assert bot.calls.get(results[1].call_id).turn_group_id == turn
        assert bot.supersede(turn).superseded
        late = bot.execute("stamp", {"mark": "c", "path": str(sink)}, turn_group_id=turn)
        assert late.status is CallStatus.SUPERSEDED
        page = admin.audit.list(call_id=results[1].call_id)
        assert "call.succeeded" in [e.type for e in page.events]
        assert admin.audit.verify().ok
    assert sink.read_text() == "b\n"
