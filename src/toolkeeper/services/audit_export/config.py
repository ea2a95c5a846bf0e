"""The ``audit_export:`` section: where audit events are streamed (guides/audit-export.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class AuditSinkConfig(_Section):
    """One destination for the audit events, with its own persisted cursor."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    """Names the sink's cursor in the store: renaming a sink starts it from the beginning."""
    kind: Literal["otlp", "splunk_hec", "elasticsearch"]
    """``otlp``: OTLP/HTTP logs (the OpenTelemetry SDK's exporter); ``splunk_hec``: Splunk's
    HTTP Event Collector; ``elasticsearch``: the ``_bulk`` API (also OpenSearch)."""
    url: str = Field(pattern=r"^https?://", max_length=2000)
    """``otlp``: the logs endpoint (``…/v1/logs``); ``splunk_hec``: the event endpoint
    (``…/services/collector/event``); ``elasticsearch``: the cluster's base URL."""
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Header name -> environment variable holding its value (e.g. ``Authorization:
    SPLUNK_HEC_AUTH`` with ``Splunk <token>``): secrets stay out of the file."""
    index: str | None = Field(default=None, max_length=200)
    """``elasticsearch``: the index (default ``toolkeeper-audit``); ``splunk_hec``: the
    index set on each event (default: the token's)."""
    batch: int = Field(default=500, ge=1, le=10_000)
    """Events sent per request."""
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    """Per request; a request that fails or times out is sent again later."""


class AuditExportConfig(_Section):
    """Streams committed audit events to each sink, in order per tenant, at least once."""

    sinks: list[AuditSinkConfig] = Field(default_factory=list)
    """The destinations (names unique)."""
    poll_s: float = Field(default=1.0, gt=0, le=60)
    """How often new events are looked for."""
    max_backlog: int = Field(default=100_000, ge=1)
    """Events a sink may lag behind before the alarm: an error log, the metric
    ``toolkeeper_audit_export_alarm`` at 1, and ``GET /ops/audit-export`` answering 503. Calls
    never wait for a sink; the events stay in the store until it accepts them."""
    retry_max_s: float = Field(default=30.0, gt=0, le=3600)
    """Longest wait between two attempts at a sink that fails (doubling from ``poll_s``)."""

    @model_validator(mode="after")
    def _unique(self) -> AuditExportConfig:
        names = [s.name for s in self.sinks]
        if len(set(names)) != len(names):
            raise ValueError("audit_export sink names must be unique (each names a cursor)")
        return self
