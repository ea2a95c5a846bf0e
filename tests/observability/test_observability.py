"""SPEC §9: one span per call with GenAI attributes, Prometheus names, JSON logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolkeeper import Activation, Agent, Autonomy, Gateway, Profile, Risk, SideEffect, tool
from toolkeeper.observability.logs import JsonFormatter
from toolkeeper.store import Store


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def echo(text: str) -> str:
    """Echo."""
    return text


def _gateway(tmp_path: Path, **kw: Any) -> Gateway:
    gw = Gateway(Store.open(f"sqlite:///{tmp_path}/tk.db"), **kw)
    gw.registry.register(echo)
    gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(2),
                                    activations=(Activation(tool="echo"),)))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    return gw


def test_each_call_is_one_execute_tool_span(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with _gateway(tmp_path, tracer=provider.get_tracer("t")) as gw:
        ok = gw.call_sync("echo", arguments={"text": "hi"}, agent="bot")
        bad = gw.call_sync("echo", arguments={"text": 1}, agent="bot")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["execute_tool echo", "execute_tool echo"]
    attrs = dict(spans[0].attributes or {})
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "echo"
    assert attrs["gen_ai.tool.call.id"] == ok.call_id
    assert attrs["toolkeeper.gate"] == "allow"
    assert dict(spans[1].attributes or {})["toolkeeper.reason"] == str(bad.reason)


def test_metrics_use_the_spec_names(tmp_path: Path) -> None:
    with _gateway(tmp_path) as gw:
        gw.call_sync("echo", arguments={"text": "hi"}, agent="bot")
        gw.call_sync("nope", agent="bot")
        text = gw.metrics.render().decode()
    for name in ("tool_execution_duration_seconds", "tool_execution_total",
                 "tool_idempotency_cache_hits_total", "tool_side_effect_total",
                 "tool_gate_decisions_total", "tool_denials_total", "approvals_pending"):
        assert name in text
    assert 'tool_denials_total{reason="tool_not_found",tenant="default"} 1.0' in text
    assert 'tool_execution_total{status="succeeded",tenant="default",tool="echo"} 1.0' in text


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
async def ship(order: str) -> str:
    """Ship an order (irreversible)."""
    return order


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
async def wire(amount: int) -> int:
    """Wire money (high: at autonomy 2 a confirmation)."""
    return amount


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_what_happened(tmp_path: Path) -> None:
    with _gateway(tmp_path) as gw:
        for t in (ship, wire):
            gw.registry.register(t)
        gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(2), activations=(
            Activation(tool="echo"), Activation(tool="ship"), Activation(tool="wire"))),
            replace=True)
        for text in ("a", "b"):
            assert gw.call_sync("echo", arguments={"text": text}, agent="bot").ok
        for _ in range(2):  # the second is a dedupe: one side effect, one cache hit
            assert gw.call_sync("ship", arguments={"order": "o1"}, agent="bot",
                                idempotency_key="ship-o1").ok
        assert gw.call_sync("wire", arguments={"amount": 5}, agent="bot").approval_id
        got = _samples(gw.metrics.render().decode())
    t = ("tenant", "default")

    def value(name: str, **labels: str) -> float:
        return got[(name, frozenset({t, *labels.items()}))]

    assert value("tool_execution_total", tool="echo", status="succeeded") == 2
    assert value("tool_execution_total", tool="ship", status="succeeded") == 2
    assert value("tool_execution_duration_seconds_count", tool="echo", status="succeeded") == 2
    assert value("tool_side_effect_total", policy="irreversible") == 1
    assert value("tool_idempotency_cache_hits_total", tool="ship") == 1
    assert value("tool_gate_decisions_total", gate="confirm") == 1
    assert value("tool_denials_total", reason="confirmation_required") == 1
    assert value("approvals_pending") == 1


def test_call_logs_are_json_lines(tmp_path: Path, caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="toolkeeper")
    with _gateway(tmp_path) as gw:
        res = gw.call_sync("echo", arguments={"text": "hi"}, agent="bot")
    record = next(r for r in caplog.records if getattr(r, "call_id", None) == res.call_id)
    line = json.loads(JsonFormatter().format(record))
    assert line["tool"] == "echo" and line["status"] == "succeeded" and line["gate"] == "allow"
