"""Audit export: the committed audit chains streamed to OTLP logs, Splunk HEC and
Elasticsearch bulk, from a persisted cursor per sink (docs/guides/audit-export.md).

``config`` (the ``audit_export:`` section, read by the config model), ``sinks`` (the wire
formats), ``worker`` (the thread that ships them). Nothing is imported here, so loading the
config model does not load the sinks' clients.
"""
