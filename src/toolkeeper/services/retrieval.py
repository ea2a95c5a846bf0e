"""Retrieval pipelines (issue 10): the one home of their rules.

A pipeline belongs to one tenant; every use names the tenant, and another tenant's pipeline
is ``not_found`` exactly like an absent one. Ingest cuts each document into overlapping
chunks (the pipeline's ``chunk_chars``/``chunk_overlap``) and stores the whole batch in one
transaction: a refused or failed ingest leaves nothing. A query is plain words — never query
syntax — ranked by the backend's full-text search (higher ``score`` is better):
``{chunks: [{text, score, source, document_id, metadata}], pipeline_id, query}``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolkeeper.errors import OperationRefused
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.services.identities import require
from toolkeeper.store.retrieval import (
    DocumentRow,
    NewDocument,
    PipelineNameTaken,
    PipelineRow,
    RetrievalRepo,
)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TERM_RE = re.compile(r"\w+")
MAX_QUERY_CHARS = 2000
MAX_TERMS = 64
MAX_FILTERS = 16
MAX_METADATA_KEYS = 32
MAX_SOURCE_CHARS = 1000
MAX_VALUE_CHARS = 1000
MAX_INT = 2**53
DEFAULT_TOP_K = 5


def refuse(reason: str, message: str, pointer: str | None = None) -> OperationRefused:
    errors = [{"pointer": pointer, "message": message}] if pointer else None
    return OperationRefused(reason, message, **({"errors": errors} if errors else {}))


def missing(ref: Any) -> OperationRefused:
    """``not_found``: the same for an absent pipeline and another tenant's."""
    return OperationRefused(Reason.NOT_FOUND, f"no retrieval pipeline {str(ref)[:200]!r}")


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """``text`` in windows of at most ``size`` characters, each starting ``overlap``
    characters before the previous one ended; a window ends at a space when one is in its
    second half."""
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return out


def query_terms(query: Any) -> list[str]:
    """The plain words of ``query`` (``retrieval_query_invalid`` when it has none)."""
    if not isinstance(query, str) or not query.strip():
        raise refuse(Reason.RETRIEVAL_QUERY_INVALID, "query must be a non-empty string",
                     "/query")
    if len(query) > MAX_QUERY_CHARS:
        raise refuse(Reason.RETRIEVAL_QUERY_INVALID,
                     f"query is longer than {MAX_QUERY_CHARS} characters", "/query")
    terms = [t for t in dict.fromkeys(t.lower() for t in TERM_RE.findall(query))
             if t != "or"][:MAX_TERMS]
    if not terms:
        raise refuse(Reason.RETRIEVAL_QUERY_INVALID, "query has no words to search for",
                     "/query")
    return terms


def _scalar_map(value: Any, what: str, reason: str, limit: int,
                at: str = "") -> dict[str, Any]:
    """``value`` as a mapping of safe keys to strings, numbers and booleans (``at``: the
    pointer of the object holding it)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or len(value) > limit:
        raise refuse(reason, f"{what} must be an object of at most {limit} keys", f"{at}/{what}")
    for key, item in value.items():
        if not isinstance(key, str) or not KEY_RE.match(key):
            raise refuse(reason, f"{what} keys are 1-64 letters, digits, '_' or '-'",
                         f"{at}/{what}")
        ok = isinstance(item, bool) or (
            isinstance(item, int) and abs(item) <= MAX_INT) or (
            isinstance(item, float) and math.isfinite(item)) or (
            isinstance(item, str) and len(item) <= MAX_VALUE_CHARS)
        if not ok:
            raise refuse(reason, f"{what}.{key} must be a string (at most "
                         f"{MAX_VALUE_CHARS} characters), a finite number (integers within "
                         "±2**53) or a boolean",
                         f"{at}/{what}/{key}")
    return dict(value)


def content_digest(text: str) -> str:
    """A document's ``content_hash``."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _encodable(*values: Any) -> bool:
    """Every string of ``values`` is storable text: UTF-8 encodable, without NUL."""
    for value in values:
        if isinstance(value, str):
            try:
                value.encode()
            except UnicodeEncodeError:
                return False
            if "\x00" in value:
                return False
    return True


class RetrievalService:
    """Pipelines over ``repo`` with the limits of ``settings``. ``by`` (a principal) is
    checked when given: admins of the tenant write, admins and operators read and query;
    ``None`` is the operator (library, config). Agents query through tools, governed."""

    def __init__(self, repo: RetrievalRepo, settings: Settings) -> None:
        self._repo = repo
        self._settings = settings

    def create(self, tenant_id: str, name: str, *, description: str = "",
               chunk_chars: int = 800, chunk_overlap: int = 100,
               by: Principal | None = None) -> PipelineRow:
        self._check(by, tenant_id, write=True)
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise refuse(Reason.INVALID_ARGUMENTS, "a pipeline name is 1-128 letters, digits "
                         "or _.:- starting with a letter or digit", "/name")
        if not 100 <= chunk_chars <= 20_000 or not 0 <= chunk_overlap <= chunk_chars // 2:
            raise refuse(Reason.INVALID_ARGUMENTS, "chunk_chars is 100-20000 and "
                         "chunk_overlap 0 to half of it", "/chunk_chars")
        try:
            return self._repo.create(tenant_id, name, description[:2000], chunk_chars,
                                     chunk_overlap)
        except PipelineNameTaken:
            raise OperationRefused(Reason.CONFLICT, f"a pipeline named {name!r} exists in "
                                   "this tenant") from None

    def ensure(self, tenant_id: str, name: str, **fields: Any) -> PipelineRow:
        """The tenant's pipeline ``name``, created when absent (idempotent)."""
        found = self._repo.get(tenant_id, name)
        return found if found is not None else self.create(tenant_id, name, **fields)

    def pipelines(self, tenant_id: str, *, by: Principal | None = None) -> list[PipelineRow]:
        self._check(by, tenant_id, write=False)
        return self._repo.pipelines(tenant_id)

    def get(self, tenant_id: str, ref: str, *, by: Principal | None = None) -> PipelineRow:
        """The tenant's pipeline by id or name; ``not_found`` when absent or another's."""
        self._check(by, tenant_id, write=False)
        found = self._repo.get(tenant_id, ref) if isinstance(ref, str) else None
        if found is None:
            raise missing(ref)
        return found

    def delete(self, tenant_id: str, ref: str, *, by: Principal | None = None) -> None:
        self._check(by, tenant_id, write=True)
        self._repo.delete(tenant_id, self.get(tenant_id, ref).id)

    def documents(self, tenant_id: str, ref: str, *,
                  by: Principal | None = None) -> list[DocumentRow]:
        return self._repo.documents(self.get(tenant_id, ref, by=by).id)

    def delete_document(self, tenant_id: str, ref: str, document_id: str, *,
                        by: Principal | None = None) -> None:
        self._check(by, tenant_id, write=True)
        if not self._repo.delete_document(self.get(tenant_id, ref).id, document_id):
            raise OperationRefused(Reason.NOT_FOUND, f"no document {document_id[:200]!r}")

    def ingest(self, tenant_id: str, ref: str, docs: Sequence[Mapping[str, Any]], *,
               by: Principal | None = None) -> list[DocumentRow]:
        """Chunk and store ``docs`` (``{text, source?, metadata?}``), all or nothing."""
        self._check(by, tenant_id, write=True)
        pipeline = self.get(tenant_id, ref)
        cap = self._settings.retrieval_max_batch_documents
        if not docs or len(docs) > cap:
            raise refuse(Reason.RETRIEVAL_INGEST_TOO_LARGE if docs else
                         Reason.RETRIEVAL_DOCUMENT_INVALID,
                         f"an ingest holds 1 to {cap} documents", "/documents")
        ready = [self._prepare(pipeline, i, doc) for i, doc in enumerate(docs)]
        return self._repo.add_documents(pipeline.id, ready)

    def _prepare(self, pipeline: PipelineRow, i: int, doc: Mapping[str, Any]) -> NewDocument:
        at = f"/documents/{i}"
        text = doc.get("text") if isinstance(doc, Mapping) else None
        if not isinstance(text, str) or not text.strip():
            raise refuse(Reason.RETRIEVAL_DOCUMENT_INVALID, f"document {i} needs a non-empty "
                         "text", f"{at}/text")
        cap = self._settings.retrieval_max_document_chars
        if len(text) > cap:
            raise refuse(Reason.RETRIEVAL_INGEST_TOO_LARGE, f"document {i} is longer than "
                         f"{cap} characters", f"{at}/text")
        source = doc.get("source", "")
        if not isinstance(source, str) or len(source) > MAX_SOURCE_CHARS:
            raise refuse(Reason.RETRIEVAL_DOCUMENT_INVALID, f"document {i}: source is a "
                         f"string of at most {MAX_SOURCE_CHARS} characters", f"{at}/source")
        metadata = _scalar_map(doc.get("metadata"), "metadata",
                               Reason.RETRIEVAL_DOCUMENT_INVALID, MAX_METADATA_KEYS, at)
        if not _encodable(text, source, *metadata.values()):
            raise refuse(Reason.RETRIEVAL_DOCUMENT_INVALID, f"document {i} holds text that is "
                         "not valid Unicode (a lone surrogate or NUL)", at)
        return NewDocument(source=source, metadata=metadata, content_hash=content_digest(text),
                           chunks=chunk_text(text, pipeline.chunk_chars, pipeline.chunk_overlap))

    def query(self, tenant_id: str, ref: str, query: Any, *, top_k: Any = None,
              filters: Any = None, max_top_k: int | None = None,
              by: Principal | None = None) -> dict[str, Any]:
        """The best chunks for ``query`` in the tenant's pipeline ``ref``. ``top_k``
        (default 5, or the cap when lower) above the cap (the setting, or a lower
        ``max_top_k`` of the policy) is refused."""
        self._check(by, tenant_id, write=False)
        pipeline_id = self._repo.find(tenant_id, ref) if isinstance(ref, str) else None
        if pipeline_id is None:
            raise missing(ref)
        terms = query_terms(query)
        cap = min(self._settings.retrieval_max_top_k, max_top_k or 1 << 30)
        k = min(DEFAULT_TOP_K, cap) if top_k is None else top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise refuse(Reason.INVALID_ARGUMENTS, "top_k is a positive integer", "/top_k")
        if k > cap:
            raise refuse(Reason.RETRIEVAL_TOP_K_EXCEEDED, f"top_k {k} is above the cap {cap}",
                         "/top_k")
        wanted = _scalar_map(filters, "filters", Reason.RETRIEVAL_FILTER_INVALID, MAX_FILTERS)
        found = self._repo.search(pipeline_id, terms, k, wanted)
        return {"chunks": found, "pipeline_id": pipeline_id, "query": query}

    @staticmethod
    def _check(by: Principal | None, tenant_id: str, *, write: bool) -> None:
        if by is None:
            return
        require(by, tenant_id, *((Role.ADMIN,) if write else (Role.ADMIN, Role.OPERATOR)))


def wire(factory: ProviderFactory, service: RetrievalService) -> None:
    """``rag_retrieval`` tools and the ``retrieval`` built-in of ``factory`` get the query
    function of ``service`` (nothing else of it)."""
    from toolkeeper.builtins.retrieval import RetrievalTool
    from toolkeeper.providers.retrieval import rag_provider

    factory.extra.setdefault("rag_retrieval", rag_provider(service.query))
    if "retrieval" in factory.builtins:
        factory.builtins["retrieval"] = RetrievalTool(service.query)
