"""``/docs`` and what it shows: Swagger UI served from the package (no CDN: the page works
offline, under a strict Content-Security-Policy), and an OpenAPI description that carries
the error shape and the key expiry policy (SPEC §4) with this server's values.

The Swagger UI files under ``static/swagger-ui/`` are swagger-ui-dist 5.35.0, unmodified,
Apache-2.0 (its LICENSE and NOTICE sit beside them); ``static/docs.js`` starts it.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from importlib import resources
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import Response

from toolkeeper.pipeline.runtime import Settings

router = APIRouter(include_in_schema=False)

SWAGGER_UI_VERSION = "5.35.0"
_ASSETS = {"swagger-ui.css": ("swagger-ui/swagger-ui.css", "text/css; charset=utf-8"),
           "swagger-ui-bundle.js": ("swagger-ui/swagger-ui-bundle.js",
                                    "text/javascript; charset=utf-8"),
           "docs.js": ("docs.js", "text/javascript; charset=utf-8")}
# relative URLs: /docs resolves them to /docs/assets/… and ./openapi.json (also behind a prefix)
_PAGE = b"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>toolkeeper API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/assets/swagger-ui-bundle.js"></script>
<script src="docs/assets/docs.js"></script>
</body>
</html>
"""
# Swagger UI sets inline style attributes and draws data: SVG icons; nothing else is allowed
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; "
                               "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@functools.cache
def _read(name: str) -> bytes:
    """A packaged asset, read once (``name`` is one of ``_ASSETS``)."""
    return resources.files(__package__).joinpath("static", _ASSETS[name][0]).read_bytes()


@router.get("/docs")
async def docs_page() -> Response:
    return Response(_PAGE, media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get("/docs/assets/{name}")
async def docs_asset(name: str) -> Response:
    if name not in _ASSETS:
        return Response(b"not found", status_code=404, media_type="text/plain")
    return Response(_read(name), media_type=_ASSETS[name][1],
                    headers={**_HEADERS, "Cache-Control": "public, max-age=3600"})


def _span(ttl: timedelta) -> str:
    """``24 hours``, ``30 minutes``, ``90 seconds``."""
    seconds = int(ttl.total_seconds())
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}"


def key_expiry_policy(settings: Settings) -> dict[str, Any]:
    """The policy as data (``info.x-key-expiry-policy``)."""
    return {"outcome_ttl_s": int(settings.outcome_ttl.total_seconds()),
            "stale_grace_s": int(settings.stale_grace.total_seconds()),
            "approval_ttl_s": int(settings.approval_ttl.total_seconds()),
            "expiring_statuses": ["succeeded", "failed"],
            "never_expiring_statuses": ["in_progress", "unknown"],
            "outcome_retention_s": _seconds(settings.outcome_retention),
            "audit_retention_s": _seconds(settings.audit_retention)}


def _seconds(span: timedelta | None) -> int | None:
    return None if span is None else int(span.total_seconds())


def description(settings: Settings) -> str:
    """The document's overview (Markdown, rendered at the top of ``/docs``)."""
    outcome, approval = _span(settings.outcome_ttl), _span(settings.approval_ttl)
    grace = _span(settings.stale_grace)
    retention = _retention(settings)
    return f"""The governed tool gateway for AI agents.

Every request carries `Authorization: Bearer <token>`; the token decides tenant, role and agent.

## Errors

Every error answers `{{"error": {{"reason", "message", "details"}}}}` (schema `ErrorOut`) with the
HTTP status its reason maps to. `reason` is a stable code to match on (`unauthenticated` 401,
`forbidden` 403, `not_found` 404, `invalid_arguments` 422, `rate_limited` 429,
`approvals_pending_limit` 429, …);
`message` is for people; `details` carries reason-specific data, e.g. `errors` with JSON
pointers for `invalid_arguments`. A call that ran answers 200 whatever its status: a stopped
call's reason is in its body.

## Key expiry policy

An idempotency key is remembered by its outcome record for **{outcome}** (setting
`outcome_ttl_s`). Until then the same key with the same arguments returns the stored result
(`deduped: true`), with other arguments it is refused (`idempotency_key_reused`), and while
it runs `idempotency_in_progress`. After it, a `succeeded` or `failed` record may be
replaced by a new execution. `in_progress` and `unknown` records never expire by
themselves: an `in_progress` record older than its tool's timeout plus {grace} becomes
`unknown`, which never re-executes until an operator records the real outcome
(`POST /calls/{{call_id}}/resolve`). Approvals expire after **{approval}** (setting
`approval_ttl_s`). {retention} The same values as data: `info.x-key-expiry-policy`.
"""


def _retention(settings: Settings) -> str:
    """What the retention sweeps delete (services/retention.py), in words."""
    keep = settings.outcome_retention
    outcomes = ("Expired records are kept (no outcome retention)." if keep is None else
                f"Expired `succeeded`/`failed` records and expired approvals are deleted "
                f"**{_span(keep)}** after their expiry (setting `outcome_retention_s`); "
                f"`GET /calls/{{call_id}}` then answers `not_found`.")
    audit = settings.audit_retention
    events = ("Audit events are kept forever (no `audit_retention_s`)." if audit is None else
              f"Audit events older than **{_span(audit)}** are deleted from the start of "
              f"each chain (setting `audit_retention_s`); the chain stays verifiable.")
    return f"{outcomes} {events}"


def install(app: FastAPI, settings: Settings) -> None:
    """Serve ``/docs`` from the package and publish the policy in ``/openapi.json``."""
    app.include_router(router)
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = build()
            doc["info"]["x-key-expiry-policy"] = key_expiry_policy(settings)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]
