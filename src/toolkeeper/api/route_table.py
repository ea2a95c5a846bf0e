"""Path operations declared at import and built once, into the app that serves them.

An ``APIRouter`` builds each path operation when it is declared (a pydantic validator or
serializer per parameter, body, response model and documented error response), and
``include_router`` builds every one again for the app, on the first request that routes
through it. The REST face's ~80 operations cost about a quarter of a second each time:
half of start-up to ``/healthz``. A :class:`RouteTable` records its operations instead,
and :meth:`RouteTable.install` builds them directly on the app's router, with
``include_router``'s merging (prefix, tags, responses, ``include_in_schema``), so each
is built once, before the server listens, and the app's ``dependency_overrides`` apply.
Documented error responses (``responses={code: {"model": ErrorOut}}``, ten per operation)
are read only by the OpenAPI document: they share one serializer per model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from fastapi.utils import create_model_field


class _Unbuilt(list[Any]):
    """A table's ``routes``: empty until installed, and loud if read as a router's (an
    ``app.include_router(table)`` would otherwise add no route, silently)."""

    def __iter__(self) -> Any:
        raise TypeError("a RouteTable's operations are built by table.install(app.router), "
                        "not by include_router")


class RouteTable(APIRouter):
    """An ``APIRouter`` whose path operations (``@table.get(…)`` and the like) and
    included tables are recorded, in order, and built by :meth:`install`."""

    def __init__(self, *, prefix: str = "", tags: list[str] | None = None,
                 responses: dict[int | str, dict[str, Any]] | None = None,
                 include_in_schema: bool = True) -> None:
        super().__init__(prefix=prefix, tags=list(tags or []), responses=responses,
                         include_in_schema=include_in_schema)
        self._recorded: list[tuple[str, Callable[..., Any], dict[str, Any]] | RouteTable] = []
        self.routes = _Unbuilt()

    def add_api_route(self, path: str, endpoint: Callable[..., Any],
                      **kwargs: Any) -> None:
        self._recorded.append((path, endpoint, kwargs))

    def include_router(self, router: APIRouter, **kwargs: Any) -> None:
        if not isinstance(router, RouteTable) or kwargs:
            raise TypeError("a RouteTable includes other RouteTables, as they are")
        self._recorded.append(router)

    def install(self, target: APIRouter) -> None:
        """Build the recorded operations on ``target`` (the app's router), in order."""
        self._install(target, prefix="", tags=[], responses={}, include_in_schema=True)

    def _install(self, target: APIRouter, *, prefix: str, tags: list[Any],
                 responses: dict[int | str, dict[str, Any]], include_in_schema: bool) -> None:
        prefix, tags = prefix + self.prefix, [*tags, *self.tags]
        responses = {**responses, **self.responses}
        include_in_schema = include_in_schema and self.include_in_schema
        for item in self._recorded:
            if isinstance(item, RouteTable):
                item._install(target, prefix=prefix, tags=tags, responses=responses,
                              include_in_schema=include_in_schema)
                continue
            path, endpoint, kwargs = item
            target.add_api_route(prefix + path, endpoint, **{
                **kwargs,
                "tags": [*tags, *(kwargs.get("tags") or [])],
                "responses": {**responses, **(kwargs.get("responses") or {})},
                "include_in_schema": include_in_schema and kwargs.get("include_in_schema",
                                                                      True),
                "route_class_override": _DocumentedResponses,
            })


class _DocumentedResponses(APIRoute):
    """An ``APIRoute`` whose documented responses share one serializer per model (FastAPI
    builds one per operation and status code; the OpenAPI document alone reads them)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], *,
                 responses: dict[int | str, dict[str, Any]] | None = None,
                 **kwargs: Any) -> None:
        declared = responses or {}
        super().__init__(path, endpoint, **kwargs, responses={
            code: {k: v for k, v in r.items() if k != "model"} for code, r in declared.items()})
        self.responses = declared  # as declared: the document drops "model" itself
        self.response_fields = {code: _documented(r["model"]) for code, r in declared.items()
                                if r.get("model")}


@functools.cache
def _documented(model: type[Any]) -> Any:
    return create_model_field(name=f"Response_{model.__name__}", type_=model,
                              mode="serialization")


__all__ = ["RouteTable"]
