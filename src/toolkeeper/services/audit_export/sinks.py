"""The wire formats of the audit sinks: OTLP logs, Splunk HEC, Elasticsearch bulk.

Each sink sends one batch of one tenant's chain, in ``seq`` order, and returns only once
the receiver accepted all of it; anything else raises :class:`SinkError` and the batch is
sent again later (at-least-once). Every event goes out whole — ``seq``, ``prev_hash`` and
``hash`` included — so the receiver can check the chain's links (and, with the audit key,
recompute each HMAC: docs/guides/audit-export.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import httpx
import orjson

from toolkeeper.services.audit_export.config import AuditSinkConfig
from toolkeeper.store.records import AuditEvent


class SinkError(Exception):
    """The receiver did not accept the batch (down, refused, or partly refused)."""


class Sink(Protocol):
    """One destination; ``send`` raises :class:`SinkError` unless all of ``events`` landed."""

    name: str

    def send(self, events: Sequence[AuditEvent]) -> None: ...

    def close(self) -> None: ...


def wire(event: AuditEvent) -> dict[str, Any]:
    """The exported shape of an event: the stored event as ``GET /audit`` returns it."""
    return event.to_dict()


def _headers(cfg: AuditSinkConfig) -> dict[str, str]:
    out = {}
    for header, var in cfg.headers_env.items():
        value = os.environ.get(var)
        if value is None:
            raise SinkError(f"sink {cfg.name}: environment variable {var} (header "
                            f"{header}) is not set")
        out[header] = value
    return out


class _HttpSink:
    def __init__(self, cfg: AuditSinkConfig, url: str, content_type: str) -> None:
        self.name = cfg.name
        self._cfg = cfg
        self._url = url
        self._client = httpx.Client(timeout=cfg.timeout_s, headers={
            "content-type": content_type, "user-agent": "toolkeeper-audit-export"})

    def _post(self, body: bytes) -> httpx.Response:
        try:
            resp = self._client.post(self._url, content=body, headers=_headers(self._cfg))
        except httpx.HTTPError as exc:
            raise SinkError(f"sink {self.name}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 300:
            raise SinkError(f"sink {self.name}: HTTP {resp.status_code}: {resp.text[:300]}")
        return resp

    def close(self) -> None:
        self._client.close()


class SplunkHec(_HttpSink):
    """Splunk HTTP Event Collector: concatenated JSON event objects in one POST."""

    def __init__(self, cfg: AuditSinkConfig) -> None:
        super().__init__(cfg, cfg.url, "application/json")

    def send(self, events: Sequence[AuditEvent]) -> None:
        extra = {"index": self._cfg.index} if self._cfg.index else {}
        body = b"".join(orjson.dumps({
            "time": e.ts.timestamp(), "source": "toolkeeper", "sourcetype": "toolkeeper:audit",
            **extra, "event": wire(e)}) for e in events)
        self._post(body)


class ElasticBulk(_HttpSink):
    """Elasticsearch/OpenSearch ``_bulk``: ``create`` by ``event_id``, so a batch sent
    again after a lost answer is not indexed twice (its items answer 409, taken as done)."""

    def __init__(self, cfg: AuditSinkConfig) -> None:
        super().__init__(cfg, cfg.url.rstrip("/") + "/_bulk", "application/x-ndjson")
        self._index = cfg.index or "toolkeeper-audit"

    def send(self, events: Sequence[AuditEvent]) -> None:
        lines = []
        for e in events:
            lines.append(orjson.dumps({"create": {"_index": self._index, "_id": e.event_id}}))
            lines.append(orjson.dumps(wire(e)))
        answer = self._post(b"\n".join(lines) + b"\n").json()
        if not answer.get("errors"):
            return
        bad = [item for item in answer.get("items", [])
               for op in item.values() if op.get("status", 500) not in (200, 201, 409)]
        if bad:
            raise SinkError(f"sink {self.name}: {len(bad)} events refused: "
                            f"{str(bad[0])[:300]}")


class OtlpLogs:
    """OTLP/HTTP logs through the OpenTelemetry SDK's own exporter (protobuf): one log
    record per event, its body the event as JSON, the chain fields also as attributes."""

    def __init__(self, cfg: AuditSinkConfig) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk.resources import Resource
        except ImportError as exc:  # an optional extra
            raise SinkError("the otlp audit sink needs the `otlp` extra: pip install "
                            "'toolkeeper[otlp]'") from exc
        self.name = cfg.name
        self._cfg = cfg
        self._resource = Resource.create({"service.name": "toolkeeper"})
        self._exporter: Any = None
        self._make: Callable[[], Any] = lambda: OTLPLogExporter(
            endpoint=cfg.url, headers=_headers(cfg), timeout=cfg.timeout_s)

    def send(self, events: Sequence[AuditEvent]) -> None:
        from opentelemetry._logs import LogRecord, SeverityNumber
        from opentelemetry.sdk._logs import ReadableLogRecord
        from opentelemetry.sdk._logs.export import LogRecordExportResult
        from opentelemetry.util.types import AnyValue

        if self._exporter is None:
            self._exporter = self._make()
        records = []
        for e in events:
            ns = int(e.ts.timestamp() * 1e9)
            attrs: dict[str, AnyValue] = {
                "event.name": e.type, "toolkeeper.tenant_id": e.tenant_id or "",
                "toolkeeper.seq": e.seq, "toolkeeper.event_id": e.event_id,
                "toolkeeper.prev_hash": e.prev_hash, "toolkeeper.hash": e.hash}
            rec = LogRecord(timestamp=ns, observed_timestamp=ns, severity_text="INFO",
                            severity_number=SeverityNumber.INFO,
                            body=orjson.dumps(wire(e)).decode(), attributes=attrs)
            records.append(ReadableLogRecord(rec, resource=self._resource))
        if self._exporter.export(records) is not LogRecordExportResult.SUCCESS:
            raise SinkError(f"sink {self.name}: the OTLP receiver did not accept the batch")

    def close(self) -> None:
        if self._exporter is not None:
            self._exporter.shutdown()


def make_sink(cfg: AuditSinkConfig) -> Sink:
    """The sink for ``cfg.kind``."""
    if cfg.kind == "otlp":
        return OtlpLogs(cfg)
    if cfg.kind == "splunk_hec":
        return SplunkHec(cfg)
    return ElasticBulk(cfg)
