"""Loopback receivers speaking what SIEMs ingest, for the audit export tests: Splunk HEC
(concatenated JSON events), Elasticsearch ``_bulk`` (NDJSON, ``create`` by id, 409 on a
repeat) and OTLP/HTTP logs (the protobuf ``ExportLogsServiceRequest`` the OpenTelemetry
exporter sends, decoded with the published ``opentelemetry-proto`` messages).

A receiver can be killed mid-stream — ``die_at=n`` takes the n-th request in, keeps its
events (they arrived) and hangs up without an answer, as a crashed receiver does — and
started again on the same port.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback import QuietServer


@dataclass
class Received:
    """What a receiver took in, as the exported event dicts, in arrival order."""

    events: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    die_at: int | None = None
    refuse: bool = False
    """``elasticsearch``: answer 200 with every item refused (400), as a mapping error does."""
    headers: dict[str, str] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _splunk(body: bytes, rec: Received) -> tuple[int, str, bytes]:
    text, pos, dec = body.decode(), 0, json.JSONDecoder()
    while pos < len(text):
        obj, pos = dec.raw_decode(text, pos)
        assert obj["sourcetype"] == "toolkeeper:audit" and isinstance(obj["time"], float)
        rec.events.append(obj["event"])
    return 200, "application/json", b'{"text":"Success","code":0}'


def _elastic(body: bytes, rec: Received) -> tuple[int, str, bytes]:
    lines = body.decode().splitlines()
    items, errors = [], False
    for action, doc in zip(lines[0::2], lines[1::2], strict=True):
        meta = json.loads(action)["create"]
        if rec.refuse:
            items.append({"create": {"_id": meta["_id"], "status": 400,
                                     "error": {"type": "mapper_parsing_exception"}}})
            errors = True
            continue
        if meta["_id"] in rec.ids:
            items.append({"create": {"_id": meta["_id"], "status": 409}})
            errors = True
            continue
        rec.ids.add(meta["_id"])
        rec.events.append(json.loads(doc))
        items.append({"create": {"_id": meta["_id"], "status": 201}})
    return 200, "application/json", json.dumps({"errors": errors, "items": items}).encode()


def _otlp(body: bytes, rec: Received) -> tuple[int, str, bytes]:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    )

    req = ExportLogsServiceRequest()
    req.ParseFromString(body)
    for resource_logs in req.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for lr in scope_logs.log_records:
                attrs = {a.key: a.value for a in lr.attributes}
                event = json.loads(lr.body.string_value)
                assert attrs["toolkeeper.hash"].string_value == event["hash"]
                assert attrs["toolkeeper.seq"].int_value == event["seq"]
                rec.events.append(event)
    return 200, "application/x-protobuf", ExportLogsServiceResponse().SerializeToString()


FORMATS = {"splunk_hec": _splunk, "elasticsearch": _elastic, "otlp": _otlp}


class Receiver:
    """A loopback receiver of ``kind``; :meth:`start` and :meth:`stop` as often as wanted
    (the port stays the same)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.got = Received()
        self.port = 0
        self._httpd: QuietServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        path = {"splunk_hec": "/services/collector/event", "elasticsearch": "",
                "otlp": "/v1/logs"}[self.kind]
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> Receiver:
        handle, rec = FORMATS[self.kind], self.got

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                with rec.lock:
                    rec.requests += 1
                    rec.headers = {k.lower(): v for k, v in self.headers.items()}
                    status, ctype, answer = handle(body, rec)
                    if rec.die_at == rec.requests:  # took the batch in, then "crashed"
                        self.close_connection = True
                        return
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        QuietServer.allow_reuse_address = True
        self._httpd = QuietServer(("127.0.0.1", self.port), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._httpd = None
