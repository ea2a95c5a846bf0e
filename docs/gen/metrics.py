"""reference/metrics.md: every Prometheus family ``toolkeeper.observability.metrics.Metrics``
exposes at ``GET /metrics``, read from a fresh registry (names, types, help, labels)."""

from __future__ import annotations

from typing import Any

from ._md import GENERATED, cell, code, table

INTRO = """# Metrics

[`GET /metrics`](rest.md#get-metrics) answers the Prometheus text exposition, to admins
and operators only: a token of the system tenant sees every tenant's samples and the
process's own families, any other only the samples labelled with its own tenant. This page
is generated from the gateway's collector, `toolkeeper.observability.metrics.Metrics`, and
the [audit export](../guides/audit-export.md)'s (`toolkeeper_audit_export_*`, while sinks
are configured).

"""

_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
             "gauge": ("",), "summary": ("", "_sum", "_count")}


def families() -> list[Any]:
    """The families of a new ``Metrics`` (every one, as the system tenant's scrape sees),
    and the audit export's (shown while ``audit_export`` names sinks)."""
    from toolkeeper.observability.metrics import Metrics
    from toolkeeper.services.audit_export.worker import families as export_families

    return [*Metrics().families(None), *export_families([])]


def exposed_names(family: Any) -> list[str]:
    """The sample names a scrape shows for ``family`` (``tool_execution_total``)."""
    return [family.name + s for s in _SUFFIXES.get(family.type, ("",))]


def render() -> str:
    """The page."""
    rows = []
    for f in families():
        labels = ", ".join(code(x) for x in getattr(f, "_labelnames", ()))
        rows.append([f'<a id="{f.name}"></a>' + "<br>".join(code(n) for n in exposed_names(f)),
                     f.type, labels or "—", cell(f.documentation)])
    return GENERATED + INTRO + table(["Name", "Type", "Labels", "Help"], rows)
