"""Structured JSON logs: one line per record, call fields as keys."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


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
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def configure_json_logging(level: int = logging.INFO) -> None:
    """Send toolkeeper's logs to stderr as JSON lines (used by the CLI and server)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("toolkeeper")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
