"""Retrieval pipelines over REST: create, list, get, delete; ingest (all or nothing), list
and delete documents; query. Another tenant's pipeline is 404 like an absent one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.identity_fixtures import identity_api
from tests.retrieval.support import DOCS
from tests.support.rest import RestClient, assert_error

BASE = "/retrieval/pipelines"


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with identity_api(db_url) as client:
        yield client


def make(api: RestClient, who: str = "admin", name: str = "kb", **fields: Any) -> dict[str, Any]:
    resp = api.post(who, BASE, {"name": name, "chunk_chars": 200, "chunk_overlap": 20,
                                **fields})
    assert resp.status_code == 201, resp.text
    body: dict[str, Any] = resp.json()
    return body


def test_pipeline_lifecycle_ingest_and_query(api: RestClient) -> None:
    made = make(api, description="help centre")
    assert made["id"].startswith("rp_") and made["tenant_id"] == "default"
    resp = api.post("admin", f"{BASE}/kb/documents", {"documents": DOCS})
    assert resp.status_code == 201, resp.text
    docs = resp.json()["documents"]
    assert [d["source"] for d in docs] == [d["source"] for d in DOCS]
    assert all(d["content_hash"].startswith("sha256:") and d["chunks"] >= 1 for d in docs)
    listed = api.get("operator", BASE).json()
    assert [(p["name"], p["documents"]) for p in listed] == [("kb", 3)]
    assert api.get("operator", f"{BASE}/{made['id']}").json()["name"] == "kb"
    found = api.post("operator", f"{BASE}/kb/query", {"query": "reset my password"})
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["pipeline_id"] == made["id"] and body["query"] == "reset my password"
    assert body["chunks"][0]["source"] == "help/password.md"
    filtered = api.post("operator", f"{BASE}/kb/query",
                        {"query": "password", "filters": {"section": "billing"}, "top_k": 1})
    assert [c["source"] for c in filtered.json()["chunks"]] == ["help/billing.md"]
    gone = api.call("DELETE", f"{BASE}/kb/documents/{docs[0]['id']}")
    assert gone.status_code == 204
    after = api.post("operator", f"{BASE}/kb/query", {"query": "reset"}).json()["chunks"]
    assert all(c["source"] != "help/password.md" for c in after)
    assert [d["source"] for d in api.get("admin", f"{BASE}/kb/documents").json()] == \
        ["help/billing.md", "help/fr/password.md"]
    assert api.call("DELETE", f"{BASE}/kb").status_code == 204
    assert_error(api.get("admin", f"{BASE}/kb"), 404, "not_found")
    assert api.gw.store.retrieval.documents(made["id"]) == []


def test_another_tenants_pipeline_is_404_like_an_absent_one(api: RestClient) -> None:
    theirs = make(api, who="other_admin", name="secret")
    api.post("other_admin", f"{BASE}/secret/documents", {"documents": [{"text": "roadmap"}]})
    for ref in (theirs["id"], "secret", "absent"):
        assert_error(api.get("admin", f"{BASE}/{ref}"), 404, "not_found")
        assert_error(api.post("admin", f"{BASE}/{ref}/query", {"query": "roadmap"}), 404,
                     "not_found")
        assert_error(api.post("admin", f"{BASE}/{ref}/documents",
                              {"documents": [{"text": "x"}]}), 404, "not_found")
        assert_error(api.call("DELETE", f"{BASE}/{ref}"), 404, "not_found")
    assert api.get("admin", BASE).json() == []
    assert [p["name"] for p in api.get("other_admin", BASE).json()] == ["secret"]
    assert api.gw.retrieval.get("other", theirs["id"]).documents == 1  # untouched


def test_roles_admin_writes_operator_reads_agent_neither(api: RestClient) -> None:
    make(api)
    assert_error(api.post("operator", BASE, {"name": "mine"}), 403, "forbidden")
    assert_error(api.post("operator", f"{BASE}/kb/documents", {"documents": DOCS}), 403,
                 "forbidden")
    assert_error(api.post("agent", f"{BASE}/kb/query", {"query": "x"}), 403, "forbidden")
    assert_error(api.get("agent", BASE), 403, "forbidden")
    assert_error(api.post("admin", BASE, {"name": "kb"}), 409, "conflict")


def test_a_bad_document_leaves_nothing_of_the_batch(api: RestClient) -> None:
    made = make(api)
    bad = [*DOCS, {"text": "fine", "metadata": {"nested": {"no": 1}}}]
    err = assert_error(api.post("admin", f"{BASE}/kb/documents", {"documents": bad}), 422,
                       "retrieval_document_invalid")
    assert err["details"]["errors"][0]["pointer"] == "/documents/3/metadata/nested"
    assert api.gw.store.retrieval.documents(made["id"]) == []
    assert api.post("operator", f"{BASE}/kb/query", {"query": "password"}).json()[
        "chunks"] == []


@pytest.mark.parametrize(("documents", "reason"), [
    ([], "retrieval_document_invalid"),
    ([{"text": ""}], "retrieval_document_invalid"),
    ([{"text": "x", "source": 5}], "retrieval_document_invalid"),
    ([{"text": "x", "metadata": {"bad key": 1}}], "retrieval_document_invalid"),
    ([{"text": "x" * 2001}], "retrieval_ingest_too_large"),
    ([{"text": "x"}] * 6, "retrieval_ingest_too_large"),
])
def test_ingest_limits_and_validation(api: RestClient, documents: list[Any],
                                      reason: str) -> None:
    made = make(api)
    api.gw.settings.retrieval_max_document_chars = 2000
    api.gw.settings.retrieval_max_batch_documents = 5
    assert_error(api.post("admin", f"{BASE}/kb/documents", {"documents": documents}), 422,
                 reason)
    assert api.gw.store.retrieval.documents(made["id"]) == []


@pytest.mark.parametrize(("body", "reason"), [
    ({"query": ""}, "retrieval_query_invalid"),
    ({"query": "***"}, "retrieval_query_invalid"),
    ({"query": "x", "filters": {"k": [1]}}, "retrieval_filter_invalid"),
    ({"query": "x", "top_k": 10_000}, "retrieval_top_k_exceeded"),
])
def test_bad_queries_get_a_reason(api: RestClient, body: dict[str, Any], reason: str) -> None:
    make(api)
    assert_error(api.post("operator", f"{BASE}/kb/query", body), 422, reason)


@pytest.mark.parametrize("fields", [{"name": "bad name"}, {"chunk_chars": 10},
                                    {"chunk_overlap": 150}])
def test_bad_pipelines_are_refused(api: RestClient, fields: dict[str, Any]) -> None:
    body = {"name": "kb", "chunk_chars": 200, "chunk_overlap": 20, **fields}
    assert_error(api.post("admin", BASE, body), 422, "invalid_arguments")
    assert api.get("admin", BASE).json() == []

