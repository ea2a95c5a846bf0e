"""``toolkeeper mcp --agent NAME``: serve one agent's governed tools over stdio (SPEC §7 MCP).

An MCP client (an IDE, a desktop assistant) starts this as its server process. stdout
carries only the protocol; logs go to stderr. The agent must exist in the tenant; its
profile decides what it may call, exactly as over HTTP.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from toolkeeper.cli._common import gateway, state
from toolkeeper.errors import OperationRefused
from toolkeeper.model.reasons import Reason


def mcp(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option("--agent", help="The agent the client acts as.")],
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="toolkeeper.yaml to sync at start [env TOOLKEEPER_CONFIG].",
        envvar="TOOLKEEPER_CONFIG")] = None,
) -> None:
    """Serve MCP over stdin/stdout for one agent (both protocol eras)."""
    import anyio

    from toolkeeper.mcp.server import serve_stdio

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tenant = state(ctx).tenant
    with gateway(ctx, config=str(config) if config else None) as gw:
        if (tenant, agent) not in gw.catalog.agents:
            raise OperationRefused(Reason.NOT_FOUND,
                                   f"no agent {agent!r} in tenant {tenant!r}")
        principal = gw.principal(agent=agent, tenant_id=tenant)
        assert principal is not None
        anyio.run(serve_stdio, gw, principal)
