"""Property-based conformance of the REST face against its own OpenAPI document: for
generated requests, valid and invalid, every operation answers without a 5xx, with a
status code, content type and body its schema declares (SPEC §7: OpenAPI at
``/openapi.json``; bad input gets a clear 4xx with a reason). Every success body is checked
against its declared response model, and so is every error body against the one error
shape (``response_schema_conformance``).

The gateway holds recorded calls of every outcome, approvals, an audit trail, a webhook and
a tool no agent may call, and a second test reads each of them through its own endpoint,
so the bodies checked are real ones, not just empty lists and 404s.

Bounded and deterministic: ``derandomize``, no example database, at most 15 examples per
operation and generation mode. (schemathesis' lazy ``from_fixture`` loader does not run
under this pytest, so each operation is driven with its Hypothesis strategy here.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient
from toolkeeper.api import create_app

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
BOUNDED = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))


AGENT_TAGS = {"execution", "calls", "approvals", "ops"}
"""Operations an agent token also drives (as an admin, /tools/execute mostly asks which
agent the call is for; as an agent it runs the pipeline)."""


def _operations() -> list[Any]:
    """Every (token, method, path, mode) to drive; the document needs no gateway. An
    operation without parameters, body or security has nothing to negate."""
    doc = create_app(cast(Any, None)).openapi()
    cases = []
    for path, item in sorted(doc["paths"].items()):
        for method, op in sorted(item.items()):
            modes = [GenerationMode.POSITIVE]
            if op.get("parameters") or op.get("requestBody") or op.get("security"):
                modes.append(GenerationMode.NEGATIVE)
            tokens = ["admin", "bot"] if AGENT_TAGS & set(op.get("tags", ())) else ["admin"]
            cases += [pytest.param(who, method.upper(), path, m,
                                   id=f"{who} {method.upper()} {path} {m}")
                      for who in tokens for m in modes]
    return cases


@dataclass(frozen=True, slots=True)
class Recorded:
    """Ids of what the seeded gateway holds."""

    calls: list[str]
    """Calls with an outcome record (irreversible ones that ran)."""
    unknown_call: str
    approval: str
    confirmation: str
    side_effect: str
    tool: str
    unlisted_tool: str


SEED_CALLS = [("bot", "add", {"a": 1, "b": 2}, None), ("bot", "lost", {"x": 1}, None),
              ("bot", "bank", {"invoice": "I1", "amount": 5}, "pay"),
              ("sup", "bank", {"invoice": "I2", "amount": 5}, "pay"),
              ("sup", "bank", {"invoice": "I3", "amount": 5}, "wire"),
              ("sup", "email", {"to": "a@example.com"}, "send"),
              ("bot", "bank", {"invoice": "I4"}, "pay")]
"""Succeeded, unknown, with a side effect, awaiting confirmation, awaiting approval,
awaiting a preview, invalid arguments."""


def _seed(api: RestClient) -> Recorded:
    answers = [api.execute(who, tool, args, action=action).json()
               for who, tool, args, action in SEED_CALLS]
    assert answers[-1]["error"]["reason"] == "invalid_arguments"
    answers = answers[:-1]
    by = {a["status"]: a for a in answers}
    assert {"succeeded", "unknown", "confirmation_required", "approval_required",
            "preview_required"} <= set(by)
    admin = api.auth("admin")
    tool = api.client.post("/tools", headers=admin, json={
        "name": "unlisted", "implementation_type": "http",
        "implementation_config": {"url": "https://example.com",
                                  "headers": {"X-Api-Key": "${secret:x/y}"}}})
    assert tool.status_code == 201, tool.text
    unlisted = tool.json()["id"]
    assert api.client.post(f"/tools/{unlisted}/publish", headers=admin).status_code == 200
    hook = api.client.put("/settings/webhook", headers=admin, json={
        "url": "https://example.com/hook", "secret_ref": "${secret:hooks/key}"})
    assert hook.status_code == 200, hook.text
    rows = api.gw.store.registry.tool_rows("default")
    recorded = [rec.call_id for rec in api.gw.calls.list("default")]  # those with an outcome
    assert by["unknown"]["call_id"] in recorded and len(recorded) >= 2
    return Recorded(
        calls=recorded, unknown_call=by["unknown"]["call_id"],
        approval=by["approval_required"]["approval_id"],
        confirmation=by["confirmation_required"]["approval_id"],
        side_effect=next(a["side_effect_id"] for a in answers if a["side_effect_id"]),
        tool=next(r.id for r in rows if r.definition.name == "bank"), unlisted_tool=unlisted)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RestClient, Recorded]]:
    with api_for(tmp_path_factory.mktemp("schemathesis")) as a:
        yield a, _seed(a)


@pytest.fixture(scope="module")
def api(seeded: tuple[RestClient, Recorded]) -> RestClient:
    return seeded[0]


@pytest.fixture(scope="module")
def api_schema(api: RestClient) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", api.client.app)


@pytest.mark.parametrize(("who", "method", "path", "mode"), _operations())
def test_operation_conforms_to_its_schema(api: RestClient, api_schema: Any, who: str, method: str,
                                          path: str, mode: GenerationMode) -> None:
    operation = api_schema[path][method]

    @BOUNDED
    @given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case: Any) -> None:
        case.call_and_validate(headers=api.auth(who), checks=CHECKS)

    exercise()


Read = tuple[str, str, str, dict[str, Any]]
"""(token, method, path template, Case fields)."""


def _reads(r: Recorded) -> list[Read]:
    """Each recorded thing through the endpoints that show it, as people and as agents."""
    reads: list[Read] = [("admin", "GET", path, {"path_parameters": {"call_id": c}})
                         for c in r.calls for path in ("/calls/{call_id}",
                                                       "/calls/{call_id}/story")]
    reads += [(who, "GET", path, {}) for who in ("admin", "bot") for path in (
        "/calls", "/approvals", "/tools", "/tools/health", "/discovery/catalog",
        "/discovery/available")]
    reads += [(who, "GET", path, {"path_parameters": params}) for who, path, params in (
        ("admin", "/approvals/{approval_id}", {"approval_id": r.approval}),
        ("admin", "/tools/{tool_id}", {"tool_id": r.tool}),
        ("bot", "/tools/{tool_id}", {"tool_id": r.tool}),
        ("admin", "/tools/{tool_id}", {"tool_id": r.unlisted_tool}),
        ("admin", "/tools/{tool_id}/versions", {"tool_id": r.tool}),
        ("bot", "/tools/{tool_id}/versions", {"tool_id": r.tool}),
        ("admin", "/discovery/agents/{agent}/enabled", {"agent": "bot"}),
        ("admin", "/discovery/agents/{agent}/unavailable", {"agent": "bot"}),
        ("bot", "/discovery/agents/{agent}/unavailable", {"agent": "bot"}),
        ("admin", "/agents/{name}", {"name": "bot"}),
        ("admin", "/profiles/{name}", {"name": "auto"}))]
    reads += [("admin", "GET", path, {}) for path in (
        "/audit", "/audit/verify", "/tools/builtins/templates", "/settings/webhook",
        "/tokens", "/agents", "/profiles", "/metrics", "/healthz", "/readyz")]
    reads += [
        ("admin", "GET", "/activations", {"query": {"profile": "auto"}}),
        ("admin", "POST", "/activations", {"body": {"profile": "auto", "tool": "unlisted"}}),
        ("approver", "POST", "/calls/{call_id}/resolve", {
            "path_parameters": {"call_id": r.unknown_call}, "body": {"status": "failed"}}),
        ("sup", "POST", "/approvals/{approval_id}/confirm", {
            "path_parameters": {"approval_id": r.confirmation}}),
        ("approver", "POST", "/approvals/{approval_id}/approve", {
            "path_parameters": {"approval_id": r.approval}}),
        ("admin", "POST", "/side-effects/{side_effect_id}/compensate", {
            "path_parameters": {"side_effect_id": r.side_effect}}),
        ("bot", "POST", "/turns/{turn_group_id}/supersede", {
            "path_parameters": {"turn_group_id": "t-1"}}),
        ("admin", "POST", "/tokens", {"body": {"role": "operator", "label": "ops"}})]
    return reads


def test_recorded_answers_conform_to_their_schema(tmp_path: Path) -> None:
    failures = []
    with api_for(tmp_path) as api:  # its own gateway: the fuzzing may have deleted things
        recorded = _seed(api)
        api_schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
        for who, method, path, fields in _reads(recorded):
            case = api_schema[path][method].Case(**fields)
            try:
                res = case.call_and_validate(headers=api.auth(who), checks=CHECKS)
            except Exception as exc:  # every mismatch, not just the first
                failures.append(f"{who} {method} {path}: {exc}")
                continue
            if not 200 <= res.status_code < 300:
                failures.append(f"{who} {method} {path}: {res.status_code} {res.text[:300]}")
    assert failures == []
