"""SPEC §7: ``/openapi.json`` describes every answer of the REST face: each operation
declares a success response with a body schema (a 204 has no body), and each operation
that takes a token, a parameter or a body declares its errors with the one error shape
``{"error": {"reason", "message", "details"}}``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from toolkeeper.api import create_app
from toolkeeper.gateway import Gateway

ERROR_REF = "#/components/schemas/ErrorOut"


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The document as a client reads it, from a served app."""
    url = f"sqlite:///{tmp_path_factory.mktemp('openapi')}/tk.db"
    with Gateway.open(url) as gw, TestClient(create_app(gw)) as client:
        res = client.get("/openapi.json")
        assert res.status_code == 200
        doc: dict[str, Any] = res.json()
        return doc


def operations(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{method.upper()} {path}", op) for path, item in sorted(doc["paths"].items())
            for method, op in sorted(item.items())]


def test_the_document_lists_the_operations(document: dict[str, Any]) -> None:
    names = [name for name, _op in operations(document)]
    assert "POST /tools/execute" in names and "GET /approvals" in names
    assert len(names) >= 50


def test_every_success_response_has_a_schema(document: dict[str, Any]) -> None:
    missing = []
    for name, op in operations(document):
        ok = {code: r for code, r in op["responses"].items() if code.startswith("2")}
        if not ok:
            missing.append(f"{name}: no 2xx response")
        for code, response in ok.items():
            content = response.get("content") or {}
            if code == "204":
                if content:
                    missing.append(f"{name}: a 204 with a body")
                continue
            schemas = [c.get("schema") for c in content.values()]
            if not schemas or not all(s and s != {} for s in schemas):
                missing.append(f"{name}: {code} without a body schema")
    assert missing == []


def test_a_success_schema_is_a_declared_model(document: dict[str, Any]) -> None:
    """JSON answers name their model (or a list of it), never an untyped object."""
    loose = []
    for name, op in operations(document):
        for code, response in op["responses"].items():
            schema = (response.get("content") or {}).get("application/json", {}).get("schema")
            if not code.startswith("2") or schema is None:
                continue
            inner = schema.get("items", schema)
            refs = [inner, *inner.get("anyOf", [])]
            if not any("$ref" in r for r in refs):
                loose.append(f"{name} {code}: {schema}")
    assert loose == []


def test_errors_are_declared_with_the_error_shape(document: dict[str, Any]) -> None:
    undeclared = []
    for name, op in operations(document):
        if not (op.get("security") or op.get("parameters") or op.get("requestBody")):
            continue  # /healthz: nothing to refuse
        errors = {code: r for code, r in op["responses"].items() if code[0] in "45"}
        codes = {"422"} | ({"401", "403"} if op.get("security") else set())
        for code in sorted(codes):
            schema = errors.get(code, {}).get("content", {}).get(
                "application/json", {}).get("schema", {})
            if schema.get("$ref") != ERROR_REF:
                undeclared.append(f"{name} {code}")
    assert undeclared == []
    error = document["components"]["schemas"]["ErrorOut"]
    info = document["components"]["schemas"]["ErrorInfo"]
    assert error["required"] == ["error"] and {"reason", "message"} <= set(info["required"])


def test_the_error_shape_is_a_documented_component(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert "reason" in schemas["ErrorOut"]["description"]
    assert "stable" in schemas["ErrorInfo"]["properties"]["reason"]["description"]
    assert "ErrorOut" in document["info"]["description"]  # the overview names it too
    # FastAPI's own validation error shape is never what a client receives: not declared
    assert "HTTPValidationError" not in schemas


def test_the_key_expiry_policy_is_published_with_the_defaults(document: dict[str, Any]) -> None:
    """SPEC §4: the key expiry policy is published in /docs (the description renders there)."""
    policy = document["info"]["x-key-expiry-policy"]
    assert policy == {"outcome_ttl_s": 86400, "stale_grace_s": 30, "approval_ttl_s": 86400,
                      "expiring_statuses": ["succeeded", "failed"],
                      "never_expiring_statuses": ["in_progress", "unknown"],
                      "outcome_retention_s": 86400, "audit_retention_s": None}
    text = document["info"]["description"]
    assert "## Key expiry policy" in text and "24 hours" in text
    assert "deleted **24 hours** after their expiry" in text
    assert "Audit events are kept forever" in text
    assert "idempotency_key_reused" in text and "unknown" in text


def test_the_key_expiry_policy_is_this_servers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/tk.db"
    with Gateway.open(url, outcome_ttl=timedelta(hours=2),
                      approval_ttl=timedelta(minutes=30), outcome_retention=None,
                      audit_retention=timedelta(hours=720)) as gw, \
            TestClient(create_app(gw)) as client:
        doc = client.get("/openapi.json").json()
    policy = doc["info"]["x-key-expiry-policy"]
    assert (policy["outcome_ttl_s"], policy["approval_ttl_s"]) == (7200, 1800)
    assert (policy["outcome_retention_s"], policy["audit_retention_s"]) == (None, 2592000)
    assert "Expired records are kept" in doc["info"]["description"]
    assert "older than **720 hours** are deleted" in doc["info"]["description"]
    assert "2 hours" in doc["info"]["description"]
    assert "30 minutes" in doc["info"]["description"]
