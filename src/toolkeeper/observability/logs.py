"""Structured JSON logs (one line per record, call fields as keys) and secret redaction of
every log record (SPEC §8: secrets are never logged).

Redaction is a filter on *handlers*, not on loggers: a logger's filters do not see the
records its children propagate to it, a handler's see every record it is about to write,
whoever logged it (tool code, libraries, uvicorn's own loggers). :func:`redact_handlers`
puts one on every handler configured at that moment; the server calls it once logging is
set up, :meth:`toolkeeper.Gateway.open` once for library users. Each record is redacted of
the gateway's current secret values (looked up per record: they change with the secrets)
and of the values the call running on that task or thread has resolved
(:data:`toolkeeper.secrets.redact.CALL_SECRETS`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from toolkeeper.secrets.redact import CALL_SECRETS, LIVE_SECRETS, MASK, Redactor

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}
_PLAIN = logging.Formatter()
"""Formats tracebacks exactly as the standard formatter does (never changed after)."""


class JsonFormatter(logging.Formatter):
    """Formats records as JSON; ``extra={...}`` fields become top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_text:  # formatted already (and redacted)
            out["exception"] = record.exc_text
        elif record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = record.stack_info
        return orjson.dumps(out, default=str).decode()


def configure_json_logging(level: int = logging.INFO) -> None:
    """Send toolkeeper's logs to stderr as JSON lines (used by the CLI and server)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("toolkeeper")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


class RedactingFilter(logging.Filter):
    """Masks secret values in a record before its handler writes it (never drops one)."""

    def __init__(self, redactor: Callable[[], Redactor]) -> None:
        super().__init__()
        self._redactor = redactor
        self._with_call: tuple[Redactor, frozenset[str], Redactor] | None = None
        """The last (gateway redactor, call values) → combined redactor, built once."""

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = self._current()
        if redactor:
            redact_record(record, redactor)
        return True

    def _current(self) -> Redactor:
        base = self._redactor()
        resolved = CALL_SECRETS.get()
        if LIVE_SECRETS.values():  # upstream OAuth tokens (toolkeeper.identity.upstream)
            resolved = (*resolved, *LIVE_SECRETS.values())
        if not resolved:
            return base
        values = frozenset(resolved)
        cached = self._with_call
        if cached is not None and cached[0] is base and cached[1] == values:
            return cached[2]
        combined = base.union(values)
        self._with_call = (base, values, combined)
        return combined


def redact_record(record: logging.LogRecord, redactor: Redactor) -> None:
    """Mask secrets in ``record`` in place: message and args, exception and stack text, and
    ``extra`` fields. Args keep their shape where they can (uvicorn's access formatter reads
    them by position); a message still revealing a secret is replaced by its masked text."""
    try:
        message: str | None = record.getMessage()
    except Exception:  # args that do not fit: the handler prints msg and args raw
        message = None
    extra = {k: v for k, v in vars(record).items()
             if k not in _STANDARD and v is not None and not isinstance(v, bool)}
    seen = "\0".join([message or "", *map(str, extra.values())])
    if message is None or redactor.redact_text(seen) != seen:  # one scan when clean
        if message is None or redactor.redact_text(message) != message:
            _mask_message(record, redactor, message)
        for key, value in extra.items():
            setattr(record, key, _masked(redactor, value))
    if record.exc_info and not record.exc_text:
        text = _PLAIN.formatException(record.exc_info)
        if redactor.redact_text(text) != text:
            record.exc_text = text  # formatters print exc_text when it is set
    if record.exc_text:
        record.exc_text = redactor.redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redactor.redact_text(record.stack_info)


def _mask_message(record: logging.LogRecord, redactor: Redactor, message: str | None) -> None:
    record.msg = _masked(redactor, record.msg)
    if isinstance(record.args, tuple):
        record.args = tuple(_masked(redactor, a) for a in record.args)
    elif isinstance(record.args, Mapping):
        record.args = {k: _masked(redactor, v) for k, v in record.args.items()}
    if message is None:
        return
    try:
        still = record.getMessage()
    except Exception:  # a masked number no longer fits its %d
        still = message
    if redactor.redact_text(still) != still:  # e.g. a secret inside an object's repr
        record.msg, record.args = redactor.redact_text(still), ()


def _masked(redactor: Redactor, value: Any) -> Any:
    """``value`` itself when it reveals no secret; else its masked text (JSON data masked
    inside, numbers whole)."""
    if isinstance(value, str):
        return redactor.redact_text(value)
    if isinstance(value, dict | list):
        return redactor.redact(value)
    if isinstance(value, bool):
        return value
    text = str(value)
    if redactor.redact_text(text) == text:
        return value
    return MASK if isinstance(value, int | float) else redactor.redact_text(text)


def redact_handlers(redactor: Callable[[], Redactor]) -> Callable[[], None]:
    """Put a :class:`RedactingFilter` on every handler of every logger now (and on
    ``logging.lastResort``, used when no handler is configured); returns its remover.
    Handlers configured later are not covered: call it again after reconfiguring."""
    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    handlers = {h for lg in loggers for h in lg.handlers}
    if logging.lastResort is not None:
        handlers.add(logging.lastResort)
    found = RedactingFilter(redactor)
    for handler in handlers:
        handler.addFilter(found)

    def remove() -> None:
        for handler in handlers:
            handler.removeFilter(found)

    return remove
