"""A tool's context never shows the secret values its call resolved: pytest, tracebacks and
log lines print a dataclass's repr."""

from __future__ import annotations

import asyncio

from toolkeeper.model.enums import Autonomy
from toolkeeper.providers.base import ToolContext, ToolPolicy


def test_a_resolved_secret_is_not_in_the_contexts_repr() -> None:
    async def secret(connector: str | None, key: str) -> str:
        return "s3cr3t-value-of-the-call"

    ctx = ToolContext(call_id="c1", tenant_id="default", agent="bot", tool="t",
                      action="run", tool_version="1", autonomy=Autonomy.GUARDED,
                      granted_scopes=frozenset(), policy=ToolPolicy(), _get_secret=secret)
    assert asyncio.run(ctx.secret("key", "conn")) == "s3cr3t-value-of-the-call"
    assert "s3cr3t-value-of-the-call" in ctx._resolved_secrets  # it was resolved, kept
    assert "s3cr3t-value-of-the-call" not in repr(ctx)
