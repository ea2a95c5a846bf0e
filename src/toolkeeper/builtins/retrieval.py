"""Built-in ``retrieval``: query one of the caller's tenant's retrieval pipelines.

The pipeline is the policy's ``pipeline_id`` or the call's ``pipeline_id`` argument
(within ``allowed_pipelines`` when set); it must belong to the calling tenant — another
tenant's is ``not_found``, like an absent one. ``query`` is plain words, never search
syntax; results are ``{chunks: [{text, score, source, document_id, metadata}],
pipeline_id, query}``, best (highest ``score``) first. ``top_k`` above the cap (policy
``max_top_k``, gateway ``retrieval_max_top_k``) is ``retrieval_top_k_exceeded``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext
from toolkeeper.providers.native import BaseTool
from toolkeeper.providers.retrieval import RetrievalPolicy, RetrievalQuery, run_query

QUERY_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["query"],
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 2000},
        "pipeline_id": {"type": "string", "minLength": 1, "maxLength": 200},
        "top_k": {"type": "integer", "minimum": 1},
        "filters": {"type": "object", "description": "metadata key -> value (equality)",
                    "additionalProperties": {"type": ["string", "number", "boolean"]}},
    },
}


class RetrievalTool(BaseTool):
    """Full-text search over a retrieval pipeline of the caller's tenant."""

    tool_name = "retrieval"
    description = ("Search a knowledge base (retrieval pipeline) of your tenant: the chunks "
                   "best matching the query, with their source and metadata.")
    actions: ClassVar[dict[str, ActionSpec]] = {"query": ActionSpec(
        description="The top_k chunks best matching the query (metadata filters optional).",
        input_schema=QUERY_SCHEMA, side_effect=SideEffect.PURE)}
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(is_pure=True, timeout_s=10.0)
    policy_model = RetrievalPolicy

    def __init__(self, search: RetrievalQuery | None = None) -> None:
        self._search = search

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        policy = self.checked_policy(action, context, RetrievalPolicy)
        if self._search is None:
            context.fail(Reason.PROVIDER_UNAVAILABLE, "no retrieval store is wired here")
        asked = request.get("pipeline_id")
        pipeline = policy.pipeline_id or asked
        if not isinstance(pipeline, str) or not pipeline:
            context.deny(Reason.RETRIEVAL_PIPELINE_REQUIRED,
                         "name a pipeline: pipeline_id in the policy or the arguments")
        if (asked is not None and asked != pipeline) or (
                policy.allowed_pipelines is not None
                and pipeline not in policy.allowed_pipelines):
            context.deny(Reason.RETRIEVAL_PIPELINE_NOT_ALLOWED,
                         "this pipeline is not allowed by the policy")
        return await run_query(self._search, context, pipeline, request, policy.max_top_k)
