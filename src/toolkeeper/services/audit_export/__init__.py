"""Audit export: the committed audit chains streamed to OTLP logs, Splunk HEC and
Elasticsearch bulk, from a persisted cursor per sink (docs/guides/audit-export.md)."""

from __future__ import annotations

from toolkeeper.services.audit_export.sinks import Sink, SinkError, make_sink, wire
from toolkeeper.services.audit_export.worker import AuditExporter

__all__ = ["AuditExporter", "Sink", "SinkError", "make_sink", "wire"]
