"""The retrieval store: ingest is one transaction, deleting cascades to the full-text index,
and migration 0006 turns the old ``retrieval_pipelines:{tenant}`` settings into rows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.retrieval.support import DOCS
from toolkeeper import Gateway
from toolkeeper.store import Store
from toolkeeper.store.db import Database
from toolkeeper.store.migrate import current, head, upgrade
from toolkeeper.store.retrieval import NewDocument


def test_a_failure_inside_the_ingest_transaction_leaves_no_document_or_chunk(
        db_url: str) -> None:
    with Gateway.open(db_url) as gw:
        pipeline = gw.retrieval.create("default", "kb")
        good = NewDocument(source="a.md", metadata={}, content_hash="h", chunks=["alpha beta"])
        broken = NewDocument(source="b.md", metadata={}, content_hash="h",
                             chunks=["fine", "not text \ud800"])  # the driver cannot store it
        with pytest.raises(Exception):  # noqa: B017 - the driver's own encoding error
            gw.store.retrieval.add_documents(pipeline.id, [good, broken])
        assert gw.store.retrieval.documents(pipeline.id) == []
        assert gw.retrieval.query("default", "kb", "alpha")["chunks"] == []
        assert gw.retrieval.get("default", "kb").chunks == 0


def test_the_service_refuses_such_text_with_a_reason(db_url: str) -> None:
    from toolkeeper.errors import OperationRefused

    with Gateway.open(db_url) as gw:
        gw.retrieval.create("default", "kb")
        with pytest.raises(OperationRefused) as info:
            gw.retrieval.ingest("default", "kb", [*DOCS, {"text": "bad \ud800"}])
        assert info.value.reason == "retrieval_document_invalid"
        assert gw.retrieval.get("default", "kb").documents == 0


def test_deleting_documents_and_pipelines_empties_the_index(db_url: str) -> None:
    with Gateway.open(db_url) as gw:
        gw.retrieval.create("default", "kb", chunk_chars=200, chunk_overlap=20)
        rows = gw.retrieval.ingest("default", "kb", DOCS)
        gw.retrieval.delete_document("default", "kb", rows[0].id)
        sources = {c["source"] for c in gw.retrieval.query("default", "kb", "password",
                                                           top_k=10)["chunks"]}
        assert sources == {"help/billing.md"}
        gw.retrieval.create("default", "kb2", chunk_chars=200, chunk_overlap=20)
        gw.retrieval.ingest("default", "kb2", DOCS)
        gw.retrieval.delete("default", "kb")
        assert len(gw.retrieval.query("default", "kb2", "password")["chunks"]) == 2
        with gw.store.db.read() as conn:
            left = conn.execute(sa.text("SELECT count(*) FROM retrieval_chunks")).scalar()
        assert left == sum(d.chunks for d in gw.retrieval.documents("default", "kb2"))


def test_long_documents_are_cut_into_overlapping_chunks(db_url: str) -> None:
    with Gateway.open(db_url) as gw:
        gw.retrieval.create("default", "kb", chunk_chars=100, chunk_overlap=30)
        words = " ".join(f"w{i:03d}" for i in range(200))  # 999 characters
        doc = gw.retrieval.ingest("default", "kb", [{"text": words}])[0]
        assert 10 <= doc.chunks <= 20
        hit = gw.retrieval.query("default", "kb", "w150", top_k=3)["chunks"]
        assert 1 <= len(hit) <= 2 and all("w150" in c["text"] for c in hit)
        assert all(len(c["text"]) <= 100 for c in hit)


@pytest.mark.empty_database
def test_migration_0006_copies_the_old_pipeline_settings(db_url: str) -> None:
    upgrade(db_url, "0005")
    db = Database(db_url)
    settings = sa.table("settings", sa.column("key", sa.String), sa.column("value", sa.JSON),
                        sa.column("updated_at", sa.DateTime(timezone=True)))
    try:
        with db.engine.begin() as conn:
            for tenant, names in (("acme", ["pl-1", "pl-2", "pl-1"]), ("globex", ["pl-1"])):
                conn.execute(settings.insert().values(
                    key=f"retrieval_pipelines:{tenant}", value=names,
                    updated_at=datetime.now(UTC)))
    finally:
        db.dispose()
    store = Store.open(db_url)
    try:
        assert current(db_url) == head()
        assert [p.name for p in store.retrieval.pipelines("acme")] == ["pl-1", "pl-2"]
        assert [p.name for p in store.retrieval.pipelines("globex")] == ["pl-1"]
        assert store.registry.get_setting("retrieval_pipelines:acme") is None
        acme = store.retrieval.get("acme", "pl-1")
        assert acme is not None and acme.id != store.retrieval.get("globex", "pl-1").id  # type: ignore[union-attr]
    finally:
        store.close()
