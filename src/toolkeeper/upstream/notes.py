"""What an upstream request carries of the agent's own request, and what comes back on its
response stream besides the answer (progress, log messages).

Sent upstream in ``_meta`` (from the downstream context, :mod:`.downstream`): the agent's
declared client capabilities and log level (2026-07-28, where they are per request), a
progress token of the gateway's own when the agent asked for progress (the upstream's
``notifications/progress`` for it are mapped back to the agent's token by the MCP face),
and the agent's ``traceparent``/``tracestate``. Never the agent's credentials.

Read back: a ``notifications/progress`` carrying our token, and ``notifications/message``
at or above the agent's level (none when it asked for none) — bounded (a message's data at
most :data:`MAX_LOG_CHARS` of JSON, at most :data:`MAX_NOTES` notifications per request).
Anything else on the stream is ignored.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import orjson

from toolkeeper.upstream.downstream import Downstream

log = logging.getLogger("toolkeeper.upstream")
CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert",
                 "emergency")
"""RFC 5424 severities, ascending (MCP ``LoggingLevel``)."""
MAX_NOTES: Final = 1000
MAX_LOG_CHARS: Final = 16 * 1024
MAX_MESSAGE_CHARS: Final = 1000


def at_least(level: Any, floor: str | None) -> bool:
    """Whether a message at ``level`` goes to an agent that asked for ``floor``."""
    return floor in LEVELS and level in LEVELS and LEVELS.index(level) >= LEVELS.index(floor)


def meta_for(ds: Downstream | None, token: str | int, *, modern: bool) -> dict[str, Any]:
    """The ``_meta`` entries an upstream request carries for the agent's request ``ds``
    (``token``: the progress token of ours, used only when the agent asked for progress)."""
    if ds is None:
        return {}
    meta: dict[str, Any] = {}
    if modern:
        if ds.client_capabilities:  # none declared: the envelope's {} already says so
            meta[CAPABILITIES_KEY] = ds.client_capabilities
        if ds.log_level in LEVELS:
            meta[LOG_LEVEL_KEY] = ds.log_level
    if ds.progress is not None:
        meta["progressToken"] = token
    if ds.traceparent:
        meta["traceparent"] = ds.traceparent
        if ds.tracestate:
            meta["tracestate"] = ds.tracestate
    return meta


class Notes:
    """The notifications on one upstream request's response stream, handed to ``ds``."""

    __slots__ = ("_ds", "_seen", "_token")

    def __init__(self, ds: Downstream, token: str | int) -> None:
        self._ds = ds
        self._token = token
        self._seen = 0

    async def deliver(self, event: Any) -> None:
        """One JSON-RPC message from the stream that is not the response."""
        if not isinstance(event, dict) or "id" in event or self._seen >= MAX_NOTES:
            return
        params = event.get("params")
        if not isinstance(params, dict):
            return
        self._seen += 1
        method = event.get("method")
        try:
            if method == "notifications/progress":
                await self._progress(params)
            elif method == "notifications/message":
                await self._message(params)
        except Exception as exc:  # the agent's stream is gone: the call goes on
            log.info("relaying an upstream %s failed: %s", method, exc)

    async def _progress(self, params: dict[str, Any]) -> None:
        sink, progress = self._ds.progress, params.get("progress")
        if sink is None or params.get("progressToken") != self._token:
            return
        if isinstance(progress, bool) or not isinstance(progress, int | float):
            return
        total = params.get("total")
        total = float(total) if isinstance(total, int | float) and \
            not isinstance(total, bool) else None
        message = params.get("message")
        message = message[:MAX_MESSAGE_CHARS] if isinstance(message, str) else None
        await sink(float(progress), total, message)

    async def _message(self, params: dict[str, Any]) -> None:
        sink, level = self._ds.log, params.get("level")
        if sink is None or not at_least(level, self._ds.log_level):
            return
        data = params.get("data")
        if len(orjson.dumps(data)) > MAX_LOG_CHARS:
            data = "(a log message larger than 16 KiB, dropped by the gateway)"
        logger = params.get("logger")
        await sink(str(level), data, logger[:200] if isinstance(logger, str) else None)


def refused(ds: Downstream | None, code: int, data: Any) -> None:
    """Record an upstream's ``-32021`` (missing client capability) for the MCP face."""
    if ds is None or code != -32021:
        return
    wanted = data.get("requiredCapabilities") if isinstance(data, dict) else None
    if isinstance(wanted, dict) and len(orjson.dumps(wanted)) <= 4096:
        ds.refused["requiredCapabilities"] = wanted
    else:
        ds.refused["requiredCapabilities"] = {}


__all__ = ["LEVELS", "Notes", "at_least", "meta_for", "refused"]
