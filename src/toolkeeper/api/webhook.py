"""The tenant's approval webhook over REST: ``PUT|GET|DELETE /settings/webhook`` (admins).

Delivery is the gateway's service (:mod:`toolkeeper.services.webhooks`), so an approval
created through any face notifies; this module only stores and shows the setting.
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.route_table import RouteTable
from toolkeeper.bounds import excess, refuse
from toolkeeper.errors import ConfigError, ToolDenied
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.secrets.base import parse_ref
from toolkeeper.services.webhooks import WebhookConfig, setting_key

router = RouteTable(tags=["webhooks"])


class WebhookBody(BaseModel):
    """``PUT /settings/webhook``: a URL and either a ``secret`` (kept as the tenant's
    credential ``webhooks/{tenant}/hmac``) or a ``secret_ref`` to one of its credentials."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2000)
    secret: str | None = Field(default=None, min_length=16, max_length=1000)
    secret_ref: str | None = Field(default=None, max_length=300)
    allow_hosts: list[str] = Field(default_factory=list, max_length=100)
    allow_networks: list[str] = Field(default_factory=list, max_length=100)

    @model_validator(mode="after")
    def _one_secret(self) -> WebhookBody:
        if (self.secret is None) == (self.secret_ref is None):
            raise ValueError("give exactly one of 'secret' and 'secret_ref'")
        if self.secret_ref is not None and parse_ref(self.secret_ref) is None:
            raise ValueError("'secret_ref' must look like ${secret:connector/key}")
        return self


def _store_config(gw: Gateway, tenant: str, body: WebhookBody) -> WebhookConfig:
    ref = body.secret_ref
    if body.secret is not None:
        if gw.credentials is None:
            raise ApiError(409, Reason.CONFLICT, "'secret' needs the embedded secrets backend "
                           "(config 'secrets: {backend: embedded}')")
        # the tenant's own credential; a key with '/' is not managed through /credentials
        gw.credentials.put(tenant, "webhooks", f"{tenant}/hmac", body.secret)
        gw.refresh_secrets()
        ref = f"${{secret:webhooks/{tenant}/hmac}}"
    assert ref is not None
    cfg = WebhookConfig(url=body.url, secret_ref=ref, allow_hosts=body.allow_hosts,
                        allow_networks=body.allow_networks)
    gw.store.registry.put_setting(setting_key(tenant), cfg.model_dump())
    return cfg


def _public(cfg: WebhookConfig) -> dict[str, Any]:
    return cfg.model_dump()


@router.put("/settings/webhook", response_model=WebhookConfig,
            summary="Set the tenant's approval webhook (admin)")
async def put_webhook(body: WebhookBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)
    refuse(excess(WebhookConfig, body.model_dump(), gw.settings.tenant_bounds), "the webhook")
    try:
        await WebhookConfig(url=body.url, secret_ref="-", allow_hosts=body.allow_hosts,
                            allow_networks=body.allow_networks).guard(
            gw.webhooks.resolver).check_destination(body.url)
    except ToolDenied as exc:
        raise ApiError(422, exc.reason, f"webhook URL refused: {exc.message}; list the "
                       "receiver's network in 'allow_networks' to reach it") from None
    except ConfigError as exc:
        raise ApiError(422, Reason.INVALID_ARGUMENTS, str(exc)) from None
    cfg = await anyio.to_thread.run_sync(_store_config, gw, caller.tenant_id, body)
    return _public(cfg)


@router.get("/settings/webhook", response_model=WebhookConfig,
            summary="The tenant's approval webhook (admin)")
async def get_webhook(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)
    raw = await anyio.to_thread.run_sync(gw.store.registry.get_setting,
                                         setting_key(caller.tenant_id))
    if not raw:
        raise ApiError(404, Reason.NOT_FOUND, "no webhook is set for this tenant")
    return _public(WebhookConfig.model_validate(raw))


@router.delete("/settings/webhook", status_code=204, summary="Remove the tenant's webhook")
async def delete_webhook(gw: GatewayDep, caller: Caller) -> Response:
    require(caller, Role.ADMIN)
    await anyio.to_thread.run_sync(gw.store.registry.put_setting,
                                   setting_key(caller.tenant_id), None)
    return Response(status_code=204)
