"""RFC 9728 protected-resource metadata: where MCP clients and agents learn which
authorization servers issue tokens for this gateway and which scopes to ask for. Served,
without authentication, only when ``identity.issuers`` are configured (404 otherwise: a
gateway that accepts only ``tk_…`` tokens has no authorization server to name)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from toolkeeper.api.auth import GatewayDep
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import Out
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.schemas import ErrorOut
from toolkeeper.gateway import Gateway
from toolkeeper.identity.metadata import WELL_KNOWN, document
from toolkeeper.model.reasons import Reason

router = RouteTable(tags=["identity"])
_NONE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No identity issuers are configured"}}


class ResourceMetadataOut(Out):
    """RFC 9728 protected-resource metadata."""

    resource: str = Field(description="This resource's identifier (the aud of its tokens).")
    authorization_servers: list[str] = Field(description="Issuers whose tokens it accepts.")
    scopes_supported: list[str] = Field(description="OAuth scopes the claim mapping knows.")
    bearer_methods_supported: list[str]
    resource_signing_alg_values_supported: list[str]
    resource_name: str


def _document(gw: Gateway, path: str) -> dict[str, Any]:
    bearers = gw.bearers
    if bearers.access is None or bearers.resource is None:
        raise ApiError(404, Reason.NOT_FOUND, "no identity issuers are configured here")
    return document(bearers.resource, path, bearers.access.issuers)


@router.get(WELL_KNOWN, response_model=ResourceMetadataOut, responses=_NONE,
            summary="Protected-resource metadata of the REST API (RFC 9728)")
async def resource_metadata(gw: GatewayDep) -> dict[str, Any]:
    return _document(gw, "")


@router.get(WELL_KNOWN + "/mcp", response_model=ResourceMetadataOut, responses=_NONE,
            summary="Protected-resource metadata of /mcp (RFC 9728)")
async def mcp_resource_metadata(gw: GatewayDep) -> dict[str, Any]:
    return _document(gw, "/mcp")
