"""The admin web UI (SPEC §1): an approvals inbox, the tool registry, recent calls and the
audit chain, as one static page that talks to the REST API with the operator's token.

The page holds no data of its own: it asks for a token, keeps it in the tab's
``sessionStorage`` and calls the same endpoints as every other client, so roles and tenant
isolation are the API's. A strict Content-Security-Policy allows only this origin's script
and style (no inline code), and the script writes every value with ``textContent``.
"""

from __future__ import annotations

import functools
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

router = APIRouter(include_in_schema=False)

_FILES = {"index.html": "text/html; charset=utf-8",
          "app.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8",
          "approvals.js": "text/javascript; charset=utf-8",
          "registry.js": "text/javascript; charset=utf-8",
          "graph.js": "text/javascript; charset=utf-8",
          "graph.css": "text/css; charset=utf-8",
          "calls.js": "text/javascript; charset=utf-8",
          "agents.js": "text/javascript; charset=utf-8",
          "tooledit.js": "text/javascript; charset=utf-8",
          "access.js": "text/javascript; charset=utf-8",
          "overview.js": "text/javascript; charset=utf-8",
          "overview.css": "text/css; charset=utf-8",
          "story.js": "text/javascript; charset=utf-8",
          "story.css": "text/css; charset=utf-8",
          "chartist.js": "text/javascript; charset=utf-8",
          "chartist.css": "text/css; charset=utf-8",
          "chartist.LICENSE.txt": "text/plain; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@functools.cache
def _read(name: str) -> bytes:
    """A packaged file, read once (``name`` is one of ``_FILES``)."""
    return resources.files(__package__).joinpath("static", name).read_bytes()


@router.get("/ui")
async def ui_root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
async def ui_index() -> Response:
    return Response(_read("index.html"), media_type=_FILES["index.html"], headers=_HEADERS)


@router.get("/ui/{name}")
async def ui_asset(name: str) -> Response:
    if name not in _FILES:
        return Response(b"not found", status_code=404, media_type="text/plain")
    return Response(_read(name), media_type=_FILES[name], headers=_HEADERS)


__all__ = ["router"]
