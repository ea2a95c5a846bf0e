"""Issue 12: the lean ``POST /tools/execute`` path (api/lean_execute.py) answers exactly as
the FastAPI route does. Each request — valid and malformed, allowed, refused, limited and
gated — goes to two apps over one gateway, the lean path on in one and off in the other,
and both answers must match: status, content type, the headers a client acts on, and the
JSON body (ids, times and durations minted per call normalised); so must the audit records
each wrote (:mod:`tests.support.audit_diff`). Every token is verified first (the lean
path's rule), and the lean path must answer each request itself — a spy on its answer
steps counts it — except the cases it leaves to the route by design (:data:`ROUTED`).
``$path`` in a request becomes the path's name, so calls that leave state (a key, an
approval) do not meet. The tests at the end break the lean path on purpose and show the
differential catching it (issue 26)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.exec_fixtures import _TOKENS, Gate, build_gateway
from tests.support.audit_diff import mark, written_since
from tests.support.waiting import wait_until
from toolkeeper.api import ApiSettings, create_app, lean_execute
from toolkeeper.api.auth import gateway
from toolkeeper.api.lean_execute import plan
from toolkeeper.server import ServerSettings
from toolkeeper.store import changes

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
    # the gateway notices the tokens just made (its housekeeping, about once a second) and
    # then drops its token cache once: wait for that now, or it may land between a test's
    # verified() and its request, and the lean path would rightly leave that one alone
    wait_until(lambda: gw._tokens_seen == changes.version(gw.store.db, "tokens"),
               what="the gateway saw its tokens change")
    answered: list[str] = []  # one entry per request the lean path answered itself
    try:
        with pytest.MonkeyPatch.context() as mp:
            _spy_on_the_lean_answers(mp, answered)
            with TestClient(create_app(gw, ApiSettings(rest_fast_path=True)),
                            raise_server_exceptions=False) as lean, \
                    TestClient(create_app(gw, ApiSettings(rest_fast_path=False)),
                               raise_server_exceptions=False) as route:
                yield gw, {"tokens": tokens, "lean": lean, "route": route,
                           "answered": answered}
    finally:
        hold.release.set()
        gw.close()


def _spy_on_the_lean_answers(mp: pytest.MonkeyPatch, answered: list[str]) -> None:
    """Count what the lean path answers: its two answerers (a result through the route's
    ``answer``, an exception through the app's handler), as it looks them up."""
    real_answer, real_handled = lean_execute.answer, lean_execute._handled

    def answer(res: Any) -> Any:
        answered.append("result")
        return real_answer(res)

    async def handled(scope: Any, exc: Exception) -> Any:
        answered.append("exception")
        return await real_handled(scope, exc)
    mp.setattr(lean_execute, "answer", answer)
    mp.setattr(lean_execute, "_handled", handled)


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
         headers: dict[str, str] | None = None, *, lean: bool = True) -> dict[str, Any]:
    """Both paths' answers to one request, and the audit records each wrote, which must be
    equal; the lean one returned. ``lean``: whether the lean path must answer the request
    itself (else it must leave it to the route: a request it does not take by design)."""
    gw, held = apps
    answers, written = [], []
    for side in ("lean", "route"):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        raw = raw.replace(b"$path", side.encode())
        sent = {"Content-Type": "application/json",
                **({"Authorization": f"Bearer {held['tokens'].get(who, who)}"} if who else {}),
                **{k: v.replace("$path", side) for k, v in (headers or {}).items()}}
        before, since = len(held["answered"]), mark(gw)
        answers.append(_send(held[side], raw, sent, side))
        written.append(written_since(gw, since, sides=(f"-{side}",),
                                     arguments=_arguments(raw)))
        took = held["answered"][before:]  # a refusal: the answer raised, the handler answered
        assert bool(took) == (lean and side == "lean"), \
            f"the {side} side: the lean path answered {took or 'nothing'}"
    assert answers[0] == answers[1], json.dumps(answers, indent=1, sort_keys=True)
    assert written[0] == written[1], "audit records differ: " + json.dumps(
        written, indent=1, sort_keys=True, default=str)
    return answers[0]


def _arguments(raw: bytes) -> Any:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body.get("arguments") if isinstance(body, dict) else None


def verified(apps: tuple[Any, dict[str, Any]], who: str | None) -> None:
    """``who``'s token verified by this process (as any earlier request of it would)."""
    gw, held = apps
    if who in held["tokens"]:
        gw.authenticate(held["tokens"][who])


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


_NOT_AN_AGENT = "the token is not an agent's own (the route decides who acts)"
_ROUTE_REFUSES = "the route's own validation refuses it (its 4xx has one home)"
ROUTED = {
    "a call naming another agent": _NOT_AN_AGENT,
    "an operator acting for an agent": _NOT_AN_AGENT,
    "an operator naming no agent": _NOT_AN_AGENT,
    "an approver": _NOT_AN_AGENT,
    "no token": "no verified token: the route answers 401",
    "an unknown token": "no verified token: the route looks it up, answers 401",
    "a basic scheme": "no bearer token",
    "a body without a tool": _ROUTE_REFUSES,
    "a body with an unknown field": _ROUTE_REFUSES,
    "a body that is a list": _ROUTE_REFUSES,
    "a body that is not JSON": _ROUTE_REFUSES,
    "an empty body": _ROUTE_REFUSES,
    "a text content type": _ROUTE_REFUSES,
    "a tool name too long": _ROUTE_REFUSES,
    "a key over 255 characters": _ROUTE_REFUSES,
    "a malformed chain header": _ROUTE_REFUSES,
}
"""The cases the lean path leaves to the route by design (:func:`plan` returns ``None``):
for them the differential checks the hand-over (the buffered body replayed) and that the
lean path did not answer; every other case, gated, refused and cross-tenant ones
included, must be answered by the lean path itself."""


@pytest.mark.parametrize("case", list(CASES))
def test_the_lean_path_answers_as_the_route_does(apps: tuple[Any, dict[str, Any]],
                                                 case: str) -> None:
    who, body, headers = CASES[case]
    verified(apps, who)  # the lean path's rule: a token this process has verified
    same(apps, who, body, headers, lean=case not in ROUTED)


# -- the differential catches a broken lean path ------------------------------------------

FULL = CASES["a pure call with every optional field"][1]


def test_a_lean_path_answering_another_status_is_caught(
        apps: tuple[Any, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up = lean_execute.answer  # the spy: the lean path's own answer step

    def broken(res: Any) -> Any:
        response = looked_up(res)
        response.status_code = 202
        return response
    monkeypatch.setattr(lean_execute, "answer", broken)
    verified(apps, "bot")
    with pytest.raises(AssertionError, match='"status": 202'):
        same(apps, "bot", ADD)


def test_a_lean_path_writing_other_audit_records_is_caught(
        apps: tuple[Any, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    # the lean path drops the call's task and step before the pipeline: the answers are
    # still the same, only the audit records show it
    real = lean_execute.plan

    def broken(*args: Any) -> Any:
        found = real(*args)
        return found and lean_execute.Plan(
            dataclasses.replace(found.request, task_id=None, step_id=None), found.principal)
    monkeypatch.setattr(lean_execute, "plan", broken)
    verified(apps, "bot")
    with pytest.raises(AssertionError, match="audit records differ"):
        same(apps, "bot", FULL)


def test_a_lean_path_that_answers_nothing_itself_is_caught(
        apps: tuple[Any, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    # handing everything to the route would make the differential compare the route with
    # itself: the count of what the lean path answered shows it
    monkeypatch.setattr(lean_execute, "plan", lambda *args: None)
    verified(apps, "bot")
    with pytest.raises(AssertionError, match="the lean path answered nothing"):
        same(apps, "bot", ADD)


def test_a_rate_limited_call_answers_429_with_retry_after_on_both_paths(
        apps: tuple[Any, dict[str, Any]]) -> None:
    # one call a minute per agent and tool, counted across both apps (one gateway): the
    # first call uses it up, then both paths meet the limit
    _, held = apps
    ping = json.dumps({"tool": "ping", "arguments": {}}).encode()
    headers = {"Content-Type": "application/json",
               "Authorization": f"Bearer {held['tokens']['other-bot']}"}
    verified(apps, "other-bot")
    assert _send(held["lean"], ping, headers)["status"] == 200
    answers = [_send(held[side], ping, headers) for side in ("lean", "route")]
    assert answers[0] == answers[1], json.dumps(answers, indent=1, sort_keys=True)
    assert answers[0]["status"] == 429 and answers[0]["headers"]["retry-after"] == "60"
    assert answers[0]["body"]["error"]["reason"] == "rate_limited"


def test_only_the_plainest_request_of_a_known_agent_is_taken(
        apps: tuple[Any, dict[str, Any]]) -> None:
    gw, held = apps
    verified(apps, "bot")
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
    verified(apps, "bot")
    with TestClient(app, raise_server_exceptions=False) as client:
        lean = client.post("/tools/execute", json=ADD, headers=auth)
        assert lean.status_code == 200 and lean.json()["output"] == 3 and routed == []
        acting = client.post("/tools/execute", json={**ADD, "agent": "bot"},
                             headers={"Authorization": f"Bearer {held['tokens']['operator']}"})
        assert acting.status_code == 200 and routed == ["route"]
