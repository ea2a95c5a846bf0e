"""``toolkeeper graph``: the tool dependency graph of the tenant (from ``--db``) or of a
config file (``-f``), as JSON, DOT, GraphML or Cypher; ``--around`` keeps one node's
neighbourhood. The graph itself: :mod:`toolkeeper.services.graph`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from toolkeeper.cli._common import fail, gateway, refusals, state
from toolkeeper.config.loader import load_file
from toolkeeper.config.resolve import resolve_tools
from toolkeeper.model.reasons import Reason
from toolkeeper.services.graph import Graph, build_graph
from toolkeeper.services.graph_export import render


def _from_file(path: Path) -> Graph:
    with refusals():
        config = load_file(path)
    tools = [rt.definition for rt in resolve_tools(config, path.resolve().parent)
             if rt.definition is not None]
    return build_graph(tools, config.profiles, config.agents)


def graph(
    ctx: typer.Context,
    file: Annotated[Path | None, typer.Option(
        "-f", "--file", help="Draw this config file instead of the database.",
        dir_okay=False)] = None,
    fmt: Annotated[Literal["json", "dot", "graphml", "cypher"], typer.Option(
        "--format", help="json, dot (Graphviz), graphml or cypher (Neo4j).")] = "json",
    around: Annotated[str | None, typer.Option(
        "--around", help="Keep the neighbourhood of one node id, e.g. agent:default/bot."
    )] = None,
    depth: Annotated[int, typer.Option("--depth", min=1, max=6,
                                       help="Edges away from --around.")] = 2,
) -> None:
    """Print the tool dependency graph."""
    if file is not None:
        g = _from_file(file)
    else:
        tenant = state(ctx).tenant
        with gateway(ctx) as gw:
            tools = [d for _, d in gw.store.registry.tools(tenant)]
            profiles = [p for p in gw.store.registry.profiles() if p.tenant_id == tenant]
            g = build_graph(tools, profiles, gw.identities.agents(tenant))
    if around is not None:
        if around not in g.nodes:
            fail(Reason.NOT_FOUND, f"no node {around!r} in the graph")
        g = g.around(around, depth)
    sys.stdout.write(render(g, fmt))
