"""Issue 12: the lean ``POST /tools/execute`` path (api/lean_execute.py) answers exactly as
the FastAPI route does. Each request — valid and malformed, allowed, refused, limited and
gated — goes to two apps over one gateway, the lean path on in one and off in the other,
and both answers must match: status, content type, the headers a client acts on, and the
JSON body (ids, times and durations minted per call normalised). ``$path`` in a request
becomes the path's name, so calls that leave state (a key, an approval) do not meet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.exec_fixtures import _TOKENS, Gate, build_gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.api.auth import gateway
from toolkeeper.api.lean_execute import plan
from toolkeeper.server import ServerSettings

MINTED = {"call_id", "approval_id", "preview_token", "duration_ms", "expires_at",
          "created_at", "requested_at", "trace_id", "started_at", "finished_at",
          "side_effect_id", "retry_after"}
HEADERS = ("content-type", "retry-after", "www-authenticate")


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Any]]]:
    hold = Gate()
    gw = build_gateway(f"sqlite:///{tmp_path_factory.mktemp('lean')}/tk.db", hold)
    tokens = {who: gw.store.tokens.create(tenant_id=t, role=r, agent=a)[1]
              for who, (t, r, a) in _TOKENS.items()}
    try:
        with TestClient(create_app(gw, ApiSettings(rest_fast_path=True)),
                        raise_server_exceptions=False) as lean, \
                TestClient(create_app(gw, ApiSettings(rest_fast_path=False)),
                           raise_server_exceptions=False) as route:
            yield gw, {"tokens": tokens, "lean": lean, "route": route}
    finally:
        hold.release.set()
        gw.close()


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<minted>" if (k in MINTED and v is not None) or (
            k == "idempotency_key" and str(v).startswith("call:")) else _normal(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _send(client: TestClient, body: bytes, headers: dict[str, str],
          side: str = "") -> dict[str, Any]:
    resp = client.post("/tools/execute", content=body, headers=headers)
    kind = resp.headers.get("content-type", "")
    text = resp.text.replace(f"-{side}", "-$path") if side else resp.text
    return {"status": resp.status_code,
            "headers": {h: resp.headers.get(h) for h in HEADERS},
            "body": _normal(json.loads(text)) if kind.startswith("application/json") else text}


def same(apps: tuple[Any, dict[str, Any]], who: str | None, body: Any,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    """Both paths' answers to one request, which must be equal; the lean one returned."""
    _, held = apps
    answers = []
    for side in ("lean", "route"):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        raw = raw.replace(b"$path", side.encode())
        sent = {"Content-Type": "application/json",
                **({"Authorization": f"Bearer {held['tokens'].get(who, who)}"} if who else {}),
                **{k: v.replace("$path", side) for k, v in (headers or {}).items()}}
        answers.append(_send(held[side], raw, sent, side))
    assert answers[0] == answers[1], json.dumps(answers, indent=1, sort_keys=True)
    return answers[0]


ADD = {"tool": "add", "arguments": {"a": 1, "b": 2}}
CASES: dict[str, tuple[str | None, Any, dict[str, str]]] = {
    "a pure call": ("bot", ADD, {}),
    "a pure call with every optional field": ("bot", {
        **ADD, "action": "run", "turn_group_id": "t-$path", "task_id": "k", "step_id": "s",
        "scopes": ["bank"]}, {}),
    "a call naming its own agent": ("bot", {**ADD, "agent": "bot"}, {}),
    "a call naming another agent": ("bot", {**ADD, "agent": "other-bot"}, {}),
    "an operator acting for an agent": ("operator", {**ADD, "agent": "bot"}, {}),
    "an operator naming no agent": ("operator", ADD, {}),
    "an approver": ("approver", {**ADD, "agent": "bot"}, {}),
    "no token": (None, ADD, {}),
    "an unknown token": ("tk_nope", ADD, {}),
    "a basic scheme": ("bot", ADD, {"Authorization": "Basic Ym90OmJvdA=="}),
    "arguments of the wrong type": ("bot", {"tool": "add", "arguments": {"a": "x"}}, {}),
    "an unknown tool": ("bot", {"tool": "nope", "arguments": {}}, {}),
    "another tenant's agent and tool": ("acme_bot", ADD, {}),
    "a body without a tool": ("bot", {"arguments": {}}, {}),
    "a body with an unknown field": ("bot", {**ADD, "colour": "red"}, {}),
    "a body that is a list": ("bot", [ADD], {}),
    "a body that is not JSON": ("bot", b"{tool: add}", {}),
    "an empty body": ("bot", b"", {}),
    "a body with NaN": ("bot", b'{"tool": "add", "arguments": {"a": NaN, "b": 1}}', {}),
    "a number past 64 bits": ("bot", {"tool": "add", "arguments": {"a": 2**70, "b": 1}}, {}),
    "duplicate keys": ("bot", b'{"tool": "nope", "tool": "add", "arguments": {"a": 1, "b": 2}}',
                       {}),
    "a text content type": ("bot", ADD, {"Content-Type": "text/plain"}),
    "a JSON content type with a charset": (
        "bot", ADD, {"Content-Type": "application/json; charset=utf-8"}),
    "a tool name too long": ("bot", {"tool": "x" * 201, "arguments": {}}, {}),
    "an irreversible call with a key": (
        "bot", {"tool": "charge", "arguments": {"invoice": "i-1", "amount": 5}},
        {"Idempotency-Key": "k-$path"}),
    "the same key again (deduped)": (
        "bot", {"tool": "charge", "arguments": {"invoice": "i-1", "amount": 5}},
        {"Idempotency-Key": "k-$path"}),
    "the same key with other arguments": (
        "bot", {"tool": "charge", "arguments": {"invoice": "i-1", "amount": 6}},
        {"Idempotency-Key": "k-$path"}),
    "a key in the body": (
        "bot", {"tool": "charge", "arguments": {"invoice": "i-2", "amount": 5},
                "idempotency_key": "b-$path"}, {}),
    "a key over 255 characters": ("bot", ADD, {"Idempotency-Key": "k" * 256}),
    "an outcome that is unknown": ("bot", {"tool": "lost", "arguments": {"x": 1}}, {}),
    "a tool that fails": ("bot", {"tool": "declined", "arguments": {"x": 1}}, {}),
    "a call that needs approval": (
        "sup", {"tool": "charge", "arguments": {"invoice": "i-$path", "amount": 5}}, {}),
    "a call that is denied by the gate": (
        "intern", {"tool": "bank", "action": "wire",
                   "arguments": {"invoice": "i-$path", "amount": 5}}, {}),
    "a call with a preview": ("sup", {"tool": "email", "arguments": {"to": "a-$path"}}, {}),
    "a forged approval id": (
        "sup", {"tool": "charge", "arguments": {"invoice": "i-9", "amount": 5},
                "approval_id": "ap_forged"}, {}),
    "a chain header": ("bot", ADD, {"Toolkeeper-Agent-Chain": "planner,bot"}),
    "a malformed chain header": ("bot", ADD, {"Toolkeeper-Agent-Chain": ",,"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_lean_path_answers_as_the_route_does(apps: tuple[Any, dict[str, Any]],
                                                 case: str) -> None:
    who, body, headers = CASES[case]
    same(apps, "bot", ADD)  # the token is verified in this process (the lean path's rule)
    same(apps, who, body, headers)


def test_a_rate_limited_call_answers_429_with_retry_after_on_both_paths(
        apps: tuple[Any, dict[str, Any]]) -> None:
    # one call a minute per agent and tool, counted across both apps (one gateway): the
    # first call uses it up, then both paths meet the limit
    _, held = apps
    ping = json.dumps({"tool": "ping", "arguments": {}}).encode()
    headers = {"Content-Type": "application/json",
               "Authorization": f"Bearer {held['tokens']['other-bot']}"}
    same(apps, "other-bot", ADD)
    assert _send(held["lean"], ping, headers)["status"] == 200
    answers = [_send(held[side], ping, headers) for side in ("lean", "route")]
    assert answers[0] == answers[1], json.dumps(answers, indent=1, sort_keys=True)
    assert answers[0]["status"] == 429 and answers[0]["headers"]["retry-after"] == "60"
    assert answers[0]["body"]["error"]["reason"] == "rate_limited"


def test_only_the_plainest_request_of_a_known_agent_is_taken(
        apps: tuple[Any, dict[str, Any]]) -> None:
    gw, held = apps
    same(apps, "bot", ADD)
    token = held["tokens"]["bot"]
    plain = {b"content-type": "application/json", b"authorization": f"Bearer {token}"}
    body = json.dumps(ADD).encode()
    taken = plan(gw, plain, body)
    assert taken is not None and taken.principal.agent == "bot"
    assert taken.request.tool == "add" and taken.request.arguments == {"a": 1, "b": 2}
    never_verified = {**plain, b"authorization": f"Bearer {held['tokens']['intern']}x"}
    assert plan(gw, never_verified, body) is None
    assert plan(gw, {**plain, b"content-type": "text/plain"}, body) is None
    assert plan(gw, plain, b'{"tool": 1}') is None
    assert plan(gw, {**plain, b"idempotency-key": "k" * 256}, body) is None


def test_the_setting_turns_the_lean_path_off(tmp_path: Path) -> None:
    assert ServerSettings.load({}).rest_fast_path is True
    assert ServerSettings.load({"TOOLKEEPER_REST_FAST_PATH": "false"}).rest_fast_path is False


def test_a_plain_call_never_reaches_the_route_and_the_rest_does(
        apps: tuple[Any, dict[str, Any]]) -> None:
    # the route's gateway dependency counts the requests FastAPI handles: none for what the
    # lean path answers, one for what it leaves to the route (so the differential above
    # compared two paths, not one with itself)
    gw, held = apps
    app = create_app(gw, ApiSettings(rest_fast_path=True))
    routed: list[str] = []

    async def counted() -> Any:
        routed.append("route")
        return gw

    app.dependency_overrides[gateway] = counted
    auth = {"Authorization": f"Bearer {held['tokens']['bot']}"}
    same(apps, "bot", ADD)  # verified in this process
    with TestClient(app, raise_server_exceptions=False) as client:
        lean = client.post("/tools/execute", json=ADD, headers=auth)
        assert lean.status_code == 200 and lean.json()["output"] == 3 and routed == []
        acting = client.post("/tools/execute", json={**ADD, "agent": "bot"},
                             headers={"Authorization": f"Bearer {held['tokens']['operator']}"})
        assert acting.status_code == 200 and routed == ["route"]
