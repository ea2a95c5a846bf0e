"""One error shape for every endpoint: ``{"error": {"reason", "message", "details"}}``.

Stable reason codes map to HTTP statuses here and nowhere else.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from toolkeeper.errors import ConfigError, OperationRefused
from toolkeeper.model.reasons import Reason
from toolkeeper.store.faults import RETRY_AFTER_S, is_store_unavailable, unavailable_message

log = logging.getLogger(__name__)

STATUS_OF_REASON: dict[str, int] = {
    Reason.UNAUTHENTICATED: 401,
    Reason.FORBIDDEN: 403,
    Reason.CSRF_FAILED: 403,
    Reason.SESSION_EXPIRED: 401,
    Reason.SSO_FAILED: 400,
    Reason.APPROVER_NOT_ALLOWED: 403,
    Reason.NOT_FOUND: 404,
    Reason.TOOL_NOT_FOUND: 404,
    Reason.APPROVAL_NOT_FOUND: 404,
    Reason.INVALID_STATE: 409,
    Reason.NOT_QUARANTINED: 409,
    Reason.CONFLICT: 409,
    Reason.ALREADY_COMPENSATED: 409,
    Reason.APPROVAL_EXPIRED: 409,
    Reason.IDEMPOTENCY_IN_PROGRESS: 409,
    Reason.INVALID_ARGUMENTS: 422,
    Reason.IDEMPOTENCY_KEY_REUSED: 422,
    Reason.INVALID_VERSION: 422,
    Reason.PUBLISH_VIA_ENDPOINT: 422,
    Reason.CONFIG_INVALID: 422,
    Reason.POLICY_EXCEEDS_BOUNDS: 422,
    Reason.COMPENSATION_NOT_DEFINED: 422,
    Reason.RATE_LIMITED: 429,
    Reason.PAYLOAD_TOO_LARGE: 413,
    Reason.STORE_UNAVAILABLE: 503,
}



class ApiError(Exception):
    """Raised by routes; rendered as the error shape with its HTTP status."""

    def __init__(self, status: int, reason: str, message: str,
                 details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.status, self.reason, self.message = status, reason, message
        self.details = details or {}
        self.headers = headers
        super().__init__(f"{status} {reason}: {message}")


def error_body(reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"reason": reason, "message": message, "details": details or {}}}


def refused(exc: OperationRefused) -> ApiError:
    return ApiError(STATUS_OF_REASON.get(exc.reason, 422), exc.reason, exc.message, exc.details)


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(error_body(exc.reason, exc.message, exc.details),
                          status_code=exc.status, headers=exc.headers)


async def _operation_refused(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, OperationRefused)
    return await _api_error(request, refused(exc))


async def _config_error(request: Request, exc: Exception) -> JSONResponse:
    """A definition written through the API that does not compile is the caller's error."""
    assert isinstance(exc, ConfigError)
    return await _api_error(request, ApiError(422, Reason.CONFIG_INVALID, str(exc),
                                              {"problems": exc.problems}))


async def _validation(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{"pointer": "/" + "/".join(str(p) for p in e.get("loc", ())[1:]),
               "message": str(e.get("msg", "")), "type": str(e.get("type", ""))}
              for e in exc.errors()]
    if any(e["type"] == "json_invalid" for e in errors):
        return JSONResponse(error_body("malformed_json", "the body is not valid JSON",
                                         {"errors": errors}), status_code=400)
    return JSONResponse(error_body(Reason.INVALID_ARGUMENTS, "the request is invalid",
                                     {"errors": errors}), status_code=422)


async def _http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # FastAPI raises a bare 400 when it cannot parse a body (e.g. JSON nested too deep)
    reason = {400: "malformed_json", 401: "unauthenticated", 403: "forbidden",
              404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(error_body(reason, str(exc.detail)), status_code=exc.status_code,
                          headers=getattr(exc, "headers", None))


async def _store_error(request: Request, exc: Exception) -> JSONResponse:
    """A database error outside the pipeline (auth, management routes): ``store_unavailable``
    when the database is down or cannot write, else re-raised as the bug it is (500)."""
    if not is_store_unavailable(exc):
        raise exc
    log.warning("store unavailable on %s %s: %s", request.method, request.url.path,
                type(exc).__name__)
    return await _api_error(request, store_unavailable(unavailable_message(exc)))


def store_unavailable(message: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(503, Reason.STORE_UNAVAILABLE, message, details,
                    {"Retry-After": str(RETRY_AFTER_S)})


HANDLERS = {
    SQLAlchemyError: _store_error,
    ApiError: _api_error,
    OperationRefused: _operation_refused,
    ConfigError: _config_error,
    RequestValidationError: _validation,
    StarletteHTTPException: _http,
}
