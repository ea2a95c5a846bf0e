"""RFC 9728 protected-resource metadata: where MCP clients and agents learn which
authorization servers issue tokens for this gateway and which scopes to ask for. Served,
without authentication, only when ``identity.issuers`` are configured (404 otherwise: a
gateway that accepts only ``tk_…`` tokens has no authorization server to name)."""

from __future__ import annotations

from typing import Any

from toolkeeper.api.auth import GatewayDep
from toolkeeper.api.errors import ApiError
from toolkeeper.api.route_table import RouteTable
from toolkeeper.gateway import Gateway
from toolkeeper.identity.metadata import WELL_KNOWN, document
from toolkeeper.model.reasons import Reason

router = RouteTable(tags=["identity"])


def _document(gw: Gateway, path: str) -> dict[str, Any]:
    bearers = gw.bearers
    if bearers.access is None or bearers.resource is None:
        raise ApiError(404, Reason.NOT_FOUND, "no identity issuers are configured here")
    return document(bearers.resource, path, bearers.access.issuers)


@router.get(WELL_KNOWN, summary="Protected-resource metadata of the REST API (RFC 9728)")
async def resource_metadata(gw: GatewayDep) -> dict[str, Any]:
    return _document(gw, "")


@router.get(WELL_KNOWN + "/mcp", summary="Protected-resource metadata of /mcp (RFC 9728)")
async def mcp_resource_metadata(gw: GatewayDep) -> dict[str, Any]:
    return _document(gw, "/mcp")
