"""Retrieval pipelines over REST (issue 10): create, list, get and delete pipelines; ingest
(a batch, all or nothing), list and delete documents; query. The rules live in
:class:`toolkeeper.services.retrieval.RetrievalService`; these routes translate.

A pipeline is named in paths by its id or its name, always within the caller's tenant:
another tenant's pipeline answers 404 like an absent one. Admins write; admins and
operators read and query (agents query through ``retrieval``/``rag_retrieval`` tools).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import Response
from pydantic import BaseModel, Field

from toolkeeper.api.auth import Caller, GatewayDep
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.access import blocking
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import Body

router = RouteTable(prefix="/retrieval", tags=["retrieval"], responses=ERRORS)


class PipelineBody(Body):
    """``POST /retrieval/pipelines``."""

    name: str = Field(min_length=1, max_length=128)
    description: str = Field(default="", max_length=2000)
    chunk_chars: int = Field(default=800, description="100-20000 characters per chunk")
    chunk_overlap: int = Field(default=100, description="0 to chunk_chars/2")


class IngestBody(Body):
    """``POST /retrieval/pipelines/{pipeline}/documents``: each document is
    ``{text, source?, metadata?}`` (metadata: key -> string, number or boolean)."""

    documents: list[dict[str, Any]]


class QueryBody(Body):
    """``POST /retrieval/pipelines/{pipeline}/query``: plain words (never search syntax)."""

    query: str = Field(max_length=4000)
    top_k: int | None = None
    filters: dict[str, Any] | None = None


class PipelineOut(BaseModel):
    """A retrieval pipeline with its document and chunk counts."""

    id: str
    tenant_id: str
    name: str
    description: str
    chunk_chars: int
    chunk_overlap: int
    created_at: str
    documents: int
    chunks: int


class DocumentOut(BaseModel):
    """An ingested document (its text lives in its chunks)."""

    id: str
    pipeline_id: str
    source: str
    metadata: dict[str, Any]
    content_hash: str
    chunks: int
    created_at: str


class IngestOut(BaseModel):
    """The documents one ingest stored."""

    documents: list[DocumentOut]


class ChunkOut(BaseModel):
    """One matching chunk; ``score``: higher is better (FTS5 ``-bm25`` on SQLite,
    ``ts_rank_cd`` on PostgreSQL; comparable within one answer only)."""

    text: str
    score: float
    source: str
    document_id: str
    metadata: dict[str, Any]


class QueryOut(BaseModel):
    """The best chunks first."""

    chunks: list[ChunkOut]
    pipeline_id: str
    query: str


def _json(row: Any) -> dict[str, Any]:
    out = asdict(row)
    out["created_at"] = row.created_at.isoformat()
    return out


@router.post("/pipelines", status_code=201, response_model=PipelineOut,
             summary="Create a retrieval pipeline (admin)")
async def create_pipeline(body: PipelineBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    def run() -> Any:
        return gw.retrieval.create(caller.tenant_id, body.name, description=body.description,
                                   chunk_chars=body.chunk_chars,
                                   chunk_overlap=body.chunk_overlap, by=caller)
    return _json(await blocking(run))


@router.get("/pipelines", response_model=list[PipelineOut],
            summary="The tenant's retrieval pipelines")
async def list_pipelines(gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    return [_json(p) for p in await blocking(
        lambda: gw.retrieval.pipelines(caller.tenant_id, by=caller))]


@router.get("/pipelines/{pipeline}", response_model=PipelineOut,
            summary="One retrieval pipeline (by id or name)")
async def get_pipeline(pipeline: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    return _json(await blocking(lambda: gw.retrieval.get(caller.tenant_id, pipeline,
                                                         by=caller)))


@router.delete("/pipelines/{pipeline}", status_code=204,
               summary="Delete a pipeline with its documents (admin)")
async def delete_pipeline(pipeline: str, gw: GatewayDep, caller: Caller) -> Response:
    await blocking(lambda: gw.retrieval.delete(caller.tenant_id, pipeline, by=caller))
    return Response(status_code=204)


@router.post("/pipelines/{pipeline}/documents", status_code=201, response_model=IngestOut,
             summary="Ingest documents (admin; one transaction: all or nothing)")
async def ingest(pipeline: str, body: IngestBody, gw: GatewayDep,
                 caller: Caller) -> dict[str, Any]:
    rows = await blocking(lambda: gw.retrieval.ingest(caller.tenant_id, pipeline,
                                                      body.documents, by=caller))
    return {"documents": [_json(r) for r in rows]}


@router.get("/pipelines/{pipeline}/documents", response_model=list[DocumentOut],
            summary="A pipeline's documents")
async def list_documents(pipeline: str, gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    return [_json(d) for d in await blocking(
        lambda: gw.retrieval.documents(caller.tenant_id, pipeline, by=caller))]


@router.delete("/pipelines/{pipeline}/documents/{document_id}", status_code=204,
               summary="Delete a document and its chunks (admin)")
async def delete_document(pipeline: str, document_id: str, gw: GatewayDep,
                          caller: Caller) -> Response:
    await blocking(lambda: gw.retrieval.delete_document(caller.tenant_id, pipeline,
                                                        document_id, by=caller))
    return Response(status_code=204)


@router.post("/pipelines/{pipeline}/query", response_model=QueryOut,
             summary="Query a pipeline: {chunks: [{text, score, source, document_id, "
             "metadata}], pipeline_id, query}, highest score first")
async def query(pipeline: str, body: QueryBody, gw: GatewayDep,
                caller: Caller) -> dict[str, Any]:
    return await blocking(lambda: gw.retrieval.query(
        caller.tenant_id, pipeline, body.query, top_k=body.top_k, filters=body.filters,
        by=caller))
