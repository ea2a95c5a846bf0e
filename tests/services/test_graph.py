"""The tool dependency graph: built from a catalog, its impact answers, its exports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from toolkeeper.model.profile import Activation, Agent, AgentEndpoint, Profile
from toolkeeper.model.tool import Compensation, ToolDefinition
from toolkeeper.services.graph import build_graph, findings, node_id
from toolkeeper.services.graph_export import FORMATS, render, to_json
from toolkeeper.services.graph_impact import credential_impact, tool_impact

T = "acme"


def _catalog() -> tuple[list[ToolDefinition], list[Profile], list[Agent]]:
    tickets = ToolDefinition(
        name="tickets", tenant_id=T, implementation_type="http",
        implementation={"url": "https://x.example",
                        "headers": {"Authorization": "Bearer ${secret:jira/token}"}},
        actions={"open": {}, "close": {}, "read": {}},
        compensation={"open": Compensation(action="close")})
    mail = ToolDefinition(name="mail", tenant_id=T, implementation_type="mcp",
                          implementation={"server": "mailer", "tool": "send"},
                          actions={"send": {}, "recall": {}},
                          compensation={"send": Compensation(tool="tickets", action="close")})
    helper = ToolDefinition(name="ask_helper", tenant_id=T, implementation_type="agent_call",
                            implementation={"target_agent_slug": "helper"})
    profiles = [Profile(name="support", tenant_id=T, activations=(
                    Activation(tool="tickets", actions=("open", "read")),
                    Activation(tool="mail"), Activation(tool="ask_helper"))),
                Profile(name="helping", tenant_id=T, activations=(Activation(tool="mail"),))]
    agents = [Agent(name="bot", profile="support", tenant_id=T),
              Agent(name="helper", profile="helping", tenant_id=T,
                    endpoint=AgentEndpoint(transport="http", url="https://h.example",
                                           status="published",
                                           headers={"X-Key": "${secret:helper/key}"}))]
    return [tickets, mail, helper], profiles, agents


def test_every_catalog_edge_is_in_the_one_graph() -> None:
    g = build_graph(*_catalog())
    kinds = {(g.nodes[e.source].name, e.kind, g.nodes[e.target].name) for e in g.edges}
    assert {("tickets", "has_action", "tickets#open"),
            ("tickets#open", "compensated_by", "tickets#close"),
            ("mail#send", "compensated_by", "tickets#close"),
            ("mail", "uses_server", "mailer"),
            ("tickets", "uses_credential", "jira/token"),
            ("ask_helper", "calls_agent", "helper"),
            ("support", "activates", "tickets"),
            ("bot", "uses_profile", "support"),
            ("helper", "uses_credential", "helper/key")} <= kinds
    assert not [n for n in g.nodes.values() if n.missing]


def test_disabling_a_tool_lists_who_loses_which_actions_and_broken_compensations() -> None:
    g = build_graph(*_catalog())
    out = tool_impact(g, node_id("tool", T, "tickets"), "disable")
    assert out["profiles"] == [{"profile": "support", "tenant": T, "actions": ["open", "read"]}]
    assert out["agents"] == [{"agent": "bot", "tenant": T, "profile": "support",
                              "tool": "tickets", "actions": ["open", "read"]}]
    # mail#send is undone by tickets#close; tickets' own open->close goes with it
    assert out["compensations_broken"] == [{"action": "mail#send",
                                            "compensation": "tickets#close"}]
    assert out["effect"] == "lose"
    assert tool_impact(g, node_id("tool", T, "tickets"), "republish")["effect"] == "affected"


def test_a_disabled_activation_loses_nothing() -> None:
    tools, profiles, agents = _catalog()
    profiles[0] = profiles[0].model_copy(update={"activations": (
        Activation(tool="tickets", enabled=False),)})
    out = tool_impact(build_graph(tools, profiles, agents), node_id("tool", T, "tickets"),
                      "quarantine")
    assert out["profiles"] == [] and out["agents"] == []


def test_revoking_a_credential_reaches_the_tools_and_endpoints_using_it() -> None:
    g = build_graph(*_catalog())
    out = credential_impact(g, node_id("credential", T, "jira/token"))
    assert [t["tool"] for t in out["tools"]] == ["tickets"]
    assert out["tools"][0]["agents"][0]["agent"] == "bot"
    helper = credential_impact(g, node_id("credential", T, "helper/key"))
    assert helper["agent_endpoints"] == ["helper"] and helper["tools"] == []


def test_findings_name_missing_targets_absent_credentials_and_cycles() -> None:
    tools, profiles, agents = _catalog()
    tools[1] = tools[1].model_copy(update={"compensation": {
        "send": Compensation(tool="tickets", action="reopen")}})
    back = ToolDefinition(name="ask_bot", tenant_id=T, implementation_type="agent_call",
                          implementation={"target_agent_slug": "bot"})
    profiles[1] = profiles[1].model_copy(update={"activations": (
        Activation(tool="ask_bot"), Activation(tool="ghost"))})
    agents[0] = agents[0].model_copy(update={"endpoint": AgentEndpoint(
        transport="http", url="https://b.example", status="published")})
    orphan = ToolDefinition(name="orphan", tenant_id=T)
    g = build_graph([*tools, back, orphan], profiles, agents)
    codes = {(f.code, g.nodes[f.node].name) for f in findings(g, {"jira/token"})}
    assert codes == {("compensation_target_missing", "mail#send"),
                     ("activation_tool_missing", "helping"),
                     ("credential_absent", "helper/key"),
                     ("tool_not_activated", "orphan"),
                     ("agent_call_cycle", "bot")}


def test_no_cycle_when_an_endpoint_is_not_published() -> None:
    tools, profiles, agents = _catalog()
    back = ToolDefinition(name="ask_bot", tenant_id=T, implementation_type="agent_call",
                          implementation={"target_agent_slug": "bot"})
    profiles[1] = profiles[1].model_copy(update={"activations": (Activation(tool="ask_bot"),)})
    g = build_graph([*tools, back], profiles, agents)  # bot has no endpoint
    assert "agent_call_cycle" not in {f.code for f in findings(g)}


def test_around_keeps_the_neighbourhood_only() -> None:
    g = build_graph(*_catalog()).around(node_id("agent", T, "bot"), depth=1)
    assert {n.name for n in g.nodes.values()} == {"bot", "support"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_carries_every_node_and_edge(fmt: str) -> None:
    g = build_graph(*_catalog())
    text = render(g, fmt)
    assert "token" not in text.replace("jira/token", "")  # no value, only the name
    if fmt == "json":
        assert json.loads(text) == json.loads(json.dumps(to_json(g)))
    elif fmt == "graphml":
        ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
        root = ET.fromstring(text)
        assert len(root.findall(".//g:node", ns)) == len(g.nodes)
        assert len(root.findall(".//g:edge", ns)) == len(g.edges)
    elif fmt == "dot":
        assert text.count(" -> ") == len(g.edges)
    else:
        assert text.count("MERGE (a)-[") == len(g.edges)
        assert text.count("MERGE (:") == len(g.nodes)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown graph format"):
        render(build_graph([]), "png")
