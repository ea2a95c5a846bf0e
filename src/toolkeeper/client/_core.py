"""The one core of both faces: HTTP with bounded retries, and the translation of answers
into call results and the library's exceptions (at this boundary, ``raise … from``).

Every answer of ``toolkeeper serve`` names its version (``X-Toolkeeper-Version``); one older
than :data:`MIN_SERVER_VERSION` raises :class:`ServerTooOld` naming both versions. An
answer without the header (a proxy's own error page) is not judged.

Retries, all bounded by ``max_retries`` and by ``max_wait_s`` of total sleeping:
- 429 and 503 are retried after their ``Retry-After`` (when it fits the budget; otherwise
  the answer is returned at once, with its ``retry_after``);
- a connection that never opened is retried for every request (nothing was sent);
- a request whose answer was lost (reset, read timeout) is retried only when it is safe:
  reads, and executes, which carry an idempotency key or a turn group, so the server
  answers a retry with the first execution's outcome (``deduped``) instead of running it
  again. Approve, deny and confirm are never re-sent.
"""

from __future__ import annotations

import email.utils
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from toolkeeper.client._errors import RequestRefused, ServerTooOld, ServerUnavailable
from toolkeeper.client._models import call_result, is_call_result
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.model.wire import VERSION_HEADER
from toolkeeper.version import __version__

MIN_SERVER_VERSION = "0.1.0"
"""The oldest server this client speaks with: raise it when the client starts to rely on
something a server release added (a route, a field without a usable default)."""

_RETRY_AFTER = {429, 503}
_GATEWAY_ERRORS = {502, 504}
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The client's bounds."""

    timeout: float = 30.0
    """Seconds for one HTTP request (connect, write, read), long-polls excepted (they add
    their own wait)."""
    max_retries: int = 3
    """Retries after the first attempt."""
    max_wait_s: float = 30.0
    """Total seconds the client sleeps between attempts of one operation."""
    backoff_s: float = 0.1
    """First pause after a failed connection; doubles per retry."""


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("Retry-After")
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.2.3rc1"`` → ``(1, 2, 3)``: the leading numbers of each dotted part."""
    parts = []
    for part in version.strip().split("."):
        digits = re.match(r"\d*", part)
        if digits is None or not digits.group():
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def _problem(resp: httpx.Response) -> tuple[str, str, dict[str, Any]]:
    """The reason, message and details of an error answer (any shape)."""
    try:
        err = resp.json().get("error")
    except (ValueError, AttributeError):
        err = None
    if isinstance(err, dict) and isinstance(err.get("reason"), str):
        details = err.get("details")
        return err["reason"], str(err.get("message") or err["reason"]), \
            details if isinstance(details, dict) else {}
    reason = Reason.UNAVAILABLE if resp.status_code in _RETRY_AFTER | _GATEWAY_ERRORS \
        else Reason.INTERNAL_ERROR if resp.status_code >= 500 else "http_error"
    return str(reason), f"HTTP {resp.status_code} from the server", {}


class Core:
    """Async HTTP to one ``toolkeeper serve`` as one token's holder."""

    def __init__(self, base_url: str, token: str, *, limits: Limits,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.limits = limits
        self._server_ok: str | None = None  # the last server version found new enough
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=limits.timeout, transport=transport,
            headers={"Authorization": f"Bearer {token}",
                     "User-Agent": f"toolkeeper-client/{__version__}"})

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, method: str, path: str, *, retry_safe: bool,
                   json: Any = None, params: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None,
                   timeout: float | None = None) -> httpx.Response:
        """The final answer after bounded retries; :class:`ServerUnavailable` when there is
        none, or only a 503."""
        lim, waited, attempt, sent = self.limits, 0.0, 0, False
        while True:
            try:
                resp = await self._http.request(
                    method, path, json=json, params=params, headers=headers,
                    timeout=timeout if timeout is not None else lim.timeout)
            except httpx.TransportError as exc:
                reached = not isinstance(exc, _NOT_SENT)
                sent = sent or reached
                delay = lim.backoff_s * 2.0 ** attempt
                if (reached and not retry_safe) or attempt >= lim.max_retries \
                        or waited + delay > lim.max_wait_s:
                    what = "gave no answer" if reached else "could not be reached"
                    raise ServerUnavailable(
                        f"the toolkeeper server at {self.base_url} {what} "
                        f"({type(exc).__name__}, {attempt + 1} attempt(s))",
                        may_have_applied=sent) from exc
            else:
                self._check_version(resp)
                delay_or_none = self._retry_delay(resp, attempt, retry_safe, sent)
                if delay_or_none is None or attempt >= lim.max_retries \
                        or waited + delay_or_none > lim.max_wait_s:
                    return self._final(resp, attempt, sent)
                delay = delay_or_none
            await anyio.sleep(delay)
            waited += delay
            attempt += 1

    def _check_version(self, resp: httpx.Response) -> None:
        """Refuse a server older than :data:`MIN_SERVER_VERSION` (one header lookup)."""
        server = resp.headers.get(VERSION_HEADER)
        if server is None or server == self._server_ok:  # judged once per version seen
            return
        if version_tuple(server) < version_tuple(MIN_SERVER_VERSION):
            raise ServerTooOld(self.base_url, server, __version__, MIN_SERVER_VERSION)
        self._server_ok = server

    def _final(self, resp: httpx.Response, attempt: int, sent: bool) -> httpx.Response:
        """``resp``, unless it says the server cannot serve at all (503)."""
        if resp.status_code != 503:
            return resp
        reason, message, _details = _problem(resp)
        raise ServerUnavailable(
            f"the toolkeeper server at {self.base_url} answered 503 {reason} ({message}) "
            f"to {attempt + 1} attempt(s)", may_have_applied=sent)

    def _retry_delay(self, resp: httpx.Response, attempt: int, retry_safe: bool,
                     sent: bool) -> float | None:
        """How long to wait before retrying ``resp``; ``None``: do not retry."""
        if resp.status_code in _RETRY_AFTER:
            after = _retry_after(resp)
            return after if after is not None else self.limits.backoff_s * 2.0 ** attempt
        if retry_safe and resp.status_code in _GATEWAY_ERRORS:
            return self.limits.backoff_s * 2.0 ** attempt
        if retry_safe and sent and resp.status_code == 409 \
                and _problem(resp)[0] == Reason.IDEMPOTENCY_IN_PROGRESS:
            # our own lost attempt is still running on the server: wait for its outcome
            return self.limits.backoff_s * 2.0 ** attempt
        return None

    async def json(self, method: str, path: str, *, retry_safe: bool | None = None,
                   **kw: Any) -> Any:
        """The JSON of a 2xx answer; :class:`RequestRefused` for an error answer."""
        safe = method == "GET" if retry_safe is None else retry_safe
        resp = await self.send(method, path, retry_safe=safe, **kw)
        if resp.is_success:
            return resp.json() if resp.content else None
        reason, message, details = _problem(resp)
        raise RequestRefused(resp.status_code, reason, message, details)

    async def execute(self, body: dict[str, Any]) -> CallResult:
        """``POST /tools/execute``: the call's result, also when the server refused it
        with an error answer (its result is in the details) or did not answer at all."""
        tool, action = str(body.get("tool")), body.get("action")
        try:
            resp = await self.send("POST", "/tools/execute", json=body, retry_safe=True)
        except ServerUnavailable as exc:
            return unanswered(tool, action, exc, body)
        if resp.is_success:
            return call_result(resp.json())
        return _refused(resp, body)

    async def check(self, body: dict[str, Any]) -> CallResult | None:
        """``POST /tools/check``: ``None`` when the gate lets the call run now, else the
        result that stops it (as :meth:`execute` reads one; nothing runs, so a lost answer
        is ``failed``, never ``unknown``)."""
        try:
            resp = await self.send("POST", "/tools/check", json=body, retry_safe=True)
        except ServerUnavailable as exc:
            res = unanswered(str(body.get("tool")), body.get("action"), exc, body)
            res.status = CallStatus.FAILED
            return res
        if not resp.is_success:
            return _refused(resp, body)
        answer = resp.json()
        return None if answer.get("allowed") else call_result(answer["result"])


def _refused(resp: httpx.Response, body: dict[str, Any]) -> CallResult:
    """The result of a call answered with an error status."""
    tool, action = str(body.get("tool")), body.get("action")
    reason, message, details = _problem(resp)
    if is_call_result(details):  # refused by the pipeline: its own result
        return call_result(details)
    # a 5xx may have come after the call ran (a 503 never reaches here)
    status = CallStatus.DENIED if resp.status_code < 500 else CallStatus.UNKNOWN
    return CallResult(call_id=_local_id(), status=status, tool=tool, action=action,
                      reason=_reason_of(reason), message=message,
                      details=details or None, retry_after=_retry_after(resp),
                      idempotency_key=body.get("idempotency_key"))


def _local_id() -> str:
    """A call id for a result the server never sent (no call id of its own exists)."""
    return f"client-{uuid.uuid4().hex}"


def _reason_of(reason: str) -> Reason | str:
    try:
        return Reason(reason)
    except ValueError:
        return reason


def unanswered(tool: str, action: str | None, exc: ServerUnavailable,
               body: dict[str, Any]) -> CallResult:
    """The result of a call the server did not answer: ``failed`` when nothing reached it,
    ``unknown`` when a request was sent and its answer lost (it may have run; re-send with
    the same idempotency key to learn its outcome)."""
    status = CallStatus.UNKNOWN if exc.may_have_applied else CallStatus.FAILED
    return CallResult(call_id=_local_id(), status=status, tool=tool, action=action,
                      reason=Reason.UNAVAILABLE, message=exc.message,
                      idempotency_key=body.get("idempotency_key"))

