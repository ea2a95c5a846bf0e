"""The ``retrieval`` built-in and ``rag_retrieval`` tools through the pipeline (``gw.call``),
on SQLite (FTS5, bm25) and PostgreSQL (tsvector, ts_rank_cd) with the same assertions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.retrieval.support import seed
from toolkeeper import Gateway
from toolkeeper.model.enums import CallStatus


@pytest.fixture
def gw(db_url: str) -> Iterator[Gateway]:
    with Gateway.open(db_url) as gateway:
        yield gateway


def query(gw: Gateway, arguments: dict[str, Any], *, tool: str = "retrieval",
          agent: str = "bot", tenant: str = "default") -> Any:
    action = "query" if tool == "retrieval" else None
    return gw.call_sync(tool, action, arguments, agent=agent, tenant_id=tenant)


def test_builtin_query_returns_the_more_relevant_chunk_first(gw: Gateway) -> None:
    ids = seed(gw)
    res = query(gw, {"query": "how do I reset my password?", "pipeline_id": "kb"})
    assert res.status is CallStatus.SUCCEEDED, res
    out = res.output
    assert out["pipeline_id"] == ids["default"]
    assert out["query"] == "how do I reset my password?"
    chunks = out["chunks"]
    assert [c["source"] for c in chunks][:2] == ["help/password.md", "help/billing.md"]
    assert chunks[0]["score"] > chunks[1]["score"] > 0
    first = chunks[0]
    assert set(first) == {"text", "score", "source", "document_id", "metadata"}
    assert "Reset password" in first["text"]
    assert first["metadata"] == {"lang": "en", "section": "account"}
    assert all(c["source"] != "other/roadmap.md" for c in chunks)  # the tenant's own only


def test_pipeline_by_id_and_metadata_filters(gw: Gateway) -> None:
    ids = seed(gw)
    res = query(gw, {"query": "password", "pipeline_id": ids["default"],
                     "filters": {"section": "billing"}})
    assert [c["source"] for c in res.output["chunks"]] == ["help/billing.md"]
    res = query(gw, {"query": "password", "pipeline_id": "kb",
                     "filters": {"lang": "fr"}})
    assert res.output["chunks"] == []  # the French text has no "password"
    res = query(gw, {"query": "passe", "pipeline_id": "kb", "filters": {"lang": "fr"}})
    assert [c["source"] for c in res.output["chunks"]] == ["help/fr/password.md"]


@pytest.mark.parametrize("text", ['password" OR "x', "password AND (NOT", "pass*word:^",
                                  "password'); DROP TABLE retrieval_chunks; --", "NEAR(password)"])
def test_query_text_is_words_never_search_syntax(gw: Gateway, text: str) -> None:
    seed(gw)
    res = query(gw, {"query": text, "pipeline_id": "kb"})
    assert res.status is CallStatus.SUCCEEDED, res
    assert res.output["chunks"][0]["source"].startswith("help/")
    again = query(gw, {"query": "password", "pipeline_id": "kb"})
    assert len(again.output["chunks"]) == 2  # nothing was dropped


def test_another_tenants_pipeline_is_not_found_like_an_absent_one(gw: Gateway) -> None:
    ids = seed(gw)
    theirs = query(gw, {"query": "roadmap", "pipeline_id": ids["other"]})
    absent = query(gw, {"query": "roadmap", "pipeline_id": "rp_nothing"})
    for res in (theirs, absent):
        assert res.status is CallStatus.DENIED, res
        assert res.reason == "not_found"
    # the same answer, naming only what the caller asked for
    assert (theirs.message or "").replace(ids["other"], "?") == \
        (absent.message or "").replace("rp_nothing", "?")


@pytest.mark.parametrize(("arguments", "reason"), [
    ({"query": "", "pipeline_id": "kb"}, "invalid_arguments"),
    ({"pipeline_id": "kb"}, "invalid_arguments"),
    ({"query": "   ", "pipeline_id": "kb"}, "retrieval_query_invalid"),
    ({"query": "?!", "pipeline_id": "kb"}, "retrieval_query_invalid"),
    ({"query": "password"}, "retrieval_pipeline_required"),
    ({"query": "x", "pipeline_id": "kb", "filters": {"a b": "c"}}, "retrieval_filter_invalid"),
    ({"query": "x", "pipeline_id": "kb", "filters": {"lang": {"$ne": 1}}}, "invalid_arguments"),
    ({"query": "x", "pipeline_id": "kb", "top_k": 0}, "invalid_arguments"),
])
def test_bad_input_is_refused_with_a_reason(gw: Gateway, arguments: dict[str, Any],
                                            reason: str) -> None:
    seed(gw)
    res = query(gw, arguments)
    assert res.status in (CallStatus.DENIED, CallStatus.FAILED), res
    assert res.reason == reason, res


def test_top_k_is_capped_by_policy_and_setting(gw: Gateway) -> None:
    seed(gw, policy={"max_top_k": 2})
    ok = query(gw, {"query": "password reset invoices", "pipeline_id": "kb", "top_k": 2})
    assert len(ok.output["chunks"]) == 2
    one = query(gw, {"query": "password reset invoices", "pipeline_id": "kb", "top_k": 1})
    assert len(one.output["chunks"]) == 1
    over = query(gw, {"query": "password", "pipeline_id": "kb", "top_k": 3})
    assert (over.status, over.reason) == (CallStatus.DENIED, "retrieval_top_k_exceeded")
    gw.settings.retrieval_max_top_k = 1
    capped = query(gw, {"query": "password", "pipeline_id": "kb", "top_k": 2})
    assert capped.reason == "retrieval_top_k_exceeded"


def test_policy_pins_the_pipeline(gw: Gateway) -> None:
    seed(gw, policy={"pipeline_id": "kb"})
    assert query(gw, {"query": "password"}).status is CallStatus.SUCCEEDED
    other = query(gw, {"query": "password", "pipeline_id": "elsewhere"})
    assert (other.status, other.reason) == (CallStatus.DENIED,
                                            "retrieval_pipeline_not_allowed")


def test_rag_retrieval_tool_queries_its_pipeline(gw: Gateway) -> None:
    seed(gw)
    mine = query(gw, {"query": "reset password"}, tool="kb_search")
    assert mine.status is CallStatus.SUCCEEDED, mine
    assert mine.output["chunks"][0]["source"] == "help/password.md"
    theirs = query(gw, {"query": "password"}, tool="kb_search", agent="other-bot",
                   tenant="other")
    assert [c["source"] for c in theirs.output["chunks"]] == ["other/roadmap.md"]
    missing = query(gw, {"top_k": 1}, tool="kb_search")
    assert missing.reason == "invalid_arguments"  # query is required (seed 002)


def test_rag_retrieval_tool_needs_a_pipeline_of_its_tenant(gw: Gateway) -> None:
    from tests.retrieval.support import rag_tool
    from toolkeeper.errors import OperationRefused

    seed(gw)
    with pytest.raises(OperationRefused) as info:
        gw.registry.create(rag_tool("default", "missing").model_copy(
            update={"name": "kb2"}))
    assert info.value.reason == "invalid_arguments"
    other_id = gw.retrieval.get("other", "kb").id
    with pytest.raises(OperationRefused):
        gw.registry.create(rag_tool("default", other_id).model_copy(update={"name": "kb3"}))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2**64, [1], {"a": 1}, None])
def test_filter_values_the_stores_cannot_compare_are_refused(gw: Gateway, value: Any) -> None:
    from toolkeeper.errors import OperationRefused

    seed(gw)
    with pytest.raises(OperationRefused) as info:
        gw.retrieval.query("default", "kb", "password", filters={"lang": value})
    assert info.value.reason == "retrieval_filter_invalid"


def test_a_rag_tool_activation_takes_max_top_k_and_refuses_other_keys(gw: Gateway) -> None:
    from toolkeeper import Activation, Agent, Profile

    seed(gw)
    gw.registry.put_profile(Profile(name="capped", tenant_id="default", autonomy=2,
                                    activations=(Activation(tool="kb_search",
                                                            policy={"max_top_k": 1}),)))
    gw.registry.put_agent(Agent(name="capped-bot", profile="capped", tenant_id="default"))
    one = query(gw, {"query": "password"}, tool="kb_search", agent="capped-bot")
    assert one.status is CallStatus.SUCCEEDED and len(one.output["chunks"]) == 1
    gw.registry.put_profile(Profile(name="typo", tenant_id="default", autonomy=2,
                                    activations=(Activation(tool="kb_search",
                                                            policy={"max_topk": 1}),)))
    gw.registry.put_agent(Agent(name="typo-bot", profile="typo", tenant_id="default"))
    typo = query(gw, {"query": "password"}, tool="kb_search", agent="typo-bot")
    assert typo.status is not CallStatus.SUCCEEDED


def test_the_factory_names_the_rag_policy_model_without_building_the_tool() -> None:
    from tests.retrieval.support import rag_tool
    from toolkeeper.providers.factory import ProviderFactory
    from toolkeeper.providers.retrieval import RagRetrievalPolicy

    assert ProviderFactory().policy_model(rag_tool("default", "kb")) is RagRetrievalPolicy
