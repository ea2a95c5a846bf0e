"""``toolkeeper graph``: the database's tenant or a config file, in every format."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from cli_helpers import Invoke

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "toolkeeper.yaml"


def test_graph_of_the_demo_store_shows_its_agents_and_profiles(cli: Invoke,
                                                               demo_store: str) -> None:
    res = cli("graph")
    assert res.exit_code == 0, res.output
    kinds = {(n["kind"], n["name"]) for n in json.loads(res.output)["nodes"]}
    assert ("agent", "billing-bot") in kinds
    assert any(k == "profile" for k, _ in kinds)


def test_graph_of_a_file_in_every_format(cli: Invoke) -> None:
    nodes = json.loads(cli("graph", "-f", str(EXAMPLE)).output)["nodes"]
    assert nodes and not [n for n in nodes if n["missing"]]
    ET.fromstring(cli("graph", "-f", str(EXAMPLE), "--format", "graphml").output)
    assert cli("graph", "-f", str(EXAMPLE), "--format", "dot").output.startswith("digraph")
    assert "MERGE" in cli("graph", "-f", str(EXAMPLE), "--format", "cypher").output


def test_around_an_unknown_node_is_not_found(cli: Invoke) -> None:
    res = cli("graph", "-f", str(EXAMPLE), "--around", "agent:default/nobody")
    assert res.exit_code == 1 and "not_found" in res.output
