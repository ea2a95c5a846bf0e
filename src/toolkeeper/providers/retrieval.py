"""``rag_retrieval`` tools: query one of the tenant's retrieval pipelines.

The provider gets only the query function of the retrieval service (wired by the gateway);
the tenant is the call's, so a pipeline of another tenant is ``not_found`` like an absent
one. The definition's ``implementation.pipeline_id`` names the pipeline (id or name) and may
set ``max_top_k`` below the gateway's ``retrieval_max_top_k``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from toolkeeper.bounds import AtMost, Pinned, Subset
from toolkeeper.errors import OperationRefused
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.base import NoPreview, ToolContext, ToolPolicy

RetrievalQuery = Callable[..., dict[str, Any]]
"""``query(tenant_id, pipeline, query, *, top_k, filters, max_top_k) -> results``
(``toolkeeper.services.retrieval.RetrievalService.query``)."""


class RagRetrievalPolicy(ToolPolicy):
    """Bounds of a ``rag_retrieval`` tool's queries, set on the activation."""

    max_top_k: Annotated[int | None, AtMost(none_is_unlimited=True)] = Field(default=None, ge=1)
    """Caps ``top_k`` below the gateway's ``retrieval_max_top_k``."""


class RetrievalPolicy(RagRetrievalPolicy):
    """Bounds of the ``retrieval`` built-in, set on the activation (or as tool policy
    defaults)."""

    pipeline_id: Annotated[str | None, Pinned()] = Field(default=None, min_length=1, max_length=200)
    """``retrieval`` built-in: the pipeline (id or name) queried; an argument naming
    another is refused (``retrieval_pipeline_not_allowed``). Unset: the argument names it."""
    allowed_pipelines: Annotated[tuple[str, ...] | None, Subset(open="none")] = None
    """``retrieval`` built-in: pipelines (ids or names) an argument may name; ``None``:
    any pipeline of the caller's tenant."""


async def run_query(search: RetrievalQuery, ctx: ToolContext, pipeline: str,
                    arguments: dict[str, Any], max_top_k: int | None) -> dict[str, Any]:
    """Run the query on a worker thread; a refusal denies the call with its reason."""
    try:
        return await asyncio.to_thread(
            search, ctx.tenant_id, pipeline, arguments.get("query"),
            top_k=arguments.get("top_k"), filters=arguments.get("filters"),
            max_top_k=max_top_k)
    except OperationRefused as exc:
        ctx.deny(exc.reason, exc.message)


def lowest(*caps: int | None) -> int | None:
    found = [c for c in caps if c is not None]
    return min(found) if found else None


class RagRetrievalProvider(NoPreview):
    """Queries the pipeline the definition names."""

    policy_model: type[ToolPolicy] = RagRetrievalPolicy

    def __init__(self, tool: ToolDefinition, search: RetrievalQuery) -> None:
        impl = tool.implementation
        pipeline = impl.get("pipeline_id")
        if not isinstance(pipeline, str) or not pipeline:
            raise ValueError(f"{tool.name}: a rag_retrieval tool needs "
                             "implementation.pipeline_id")
        cap = impl.get("max_top_k")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError(f"{tool.name}: implementation.max_top_k is a positive integer")
        self._pipeline, self._cap, self._search = pipeline, cap, search

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        policy = ctx.policy
        cap = lowest(self._cap, getattr(policy, "max_top_k", None))
        return await run_query(self._search, ctx, self._pipeline, arguments, cap)


def rag_provider(search: RetrievalQuery) -> Callable[[ToolDefinition], RagRetrievalProvider]:
    """The factory entry for ``rag_retrieval`` (``ProviderFactory.extra``)."""
    return lambda tool: RagRetrievalProvider(tool, search)
