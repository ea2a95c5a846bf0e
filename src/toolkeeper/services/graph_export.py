"""The dependency graph written out: JSON, Graphviz DOT, GraphML and Cypher (for those who
load it into Neo4j, as seed 003's ``ToolGraph`` did).

Node attributes hold no credential values (a credential node is its ``connector/key``
name only), so every format is safe to hand to whoever may read the tenant's catalog.
"""

from __future__ import annotations

import json
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from toolkeeper.services.graph import Graph

__all__ = ["FORMATS", "render", "to_json"]

FORMATS = ("json", "dot", "graphml", "cypher")


def to_json(g: Graph) -> dict[str, Any]:
    """``{nodes: [...], edges: [...]}``, ids sorted so the output is stable."""
    return {
        "nodes": [{"id": n.id, "kind": n.kind, "name": n.name, "tenant": n.tenant,
                   "missing": n.missing, "attrs": n.attrs}
                  for n in sorted(g.nodes.values(), key=lambda n: n.id)],
        "edges": [{"source": e.source, "target": e.target, "kind": e.kind, "attrs": e.attrs}
                  for e in g.edges],
    }


def _dot_str(s: str) -> str:
    return json.dumps(s)  # a DOT ID in double quotes escapes as a JSON string does


def _dot(g: Graph) -> str:
    lines = ["digraph toolkeeper {", "  rankdir=LR;"]
    for n in sorted(g.nodes.values(), key=lambda n: n.id):
        style = ", style=dashed" if n.missing else ""
        lines.append(f"  {_dot_str(n.id)} [label={_dot_str(f'{n.kind}: {n.name}')}{style}];")
    lines += [f"  {_dot_str(e.source)} -> {_dot_str(e.target)} [label={_dot_str(e.kind)}];"
              for e in g.edges]
    return "\n".join([*lines, "}"]) + "\n"


def _graphml(g: Graph) -> str:
    keys = [("kind", "node"), ("name", "node"), ("tenant", "node"), ("missing", "node"),
            ("edge_kind", "edge")]
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    out += [f'  <key id="{k}" for="{f}" attr.name="{k}" attr.type="string"/>'
            for k, f in keys]
    out.append('  <graph id="toolkeeper" edgedefault="directed">')
    for n in sorted(g.nodes.values(), key=lambda n: n.id):
        out.append(f"    <node id={quoteattr(n.id)}>")
        for k, v in (("kind", n.kind), ("name", n.name), ("tenant", n.tenant),
                     ("missing", str(n.missing).lower())):
            out.append(f'      <data key="{k}">{escape(v)}</data>')
        out.append("    </node>")
    for i, e in enumerate(g.edges):
        out.append(f'    <edge id="e{i}" source={quoteattr(e.source)} '
                   f'target={quoteattr(e.target)}><data key="edge_kind">{escape(e.kind)}'
                   "</data></edge>")
    return "\n".join([*out, "  </graph>", "</graphml>"]) + "\n"


def _cypher_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _label(kind: str) -> str:
    return kind.capitalize()


def _cypher(g: Graph) -> str:
    """``MERGE`` statements: loading twice leaves the same graph."""
    out = []
    for n in sorted(g.nodes.values(), key=lambda n: n.id):
        out.append(f"MERGE (:{_label(n.kind)} {{id: {_cypher_str(n.id)}, "
                   f"name: {_cypher_str(n.name)}, tenant: {_cypher_str(n.tenant)}, "
                   f"missing: {str(n.missing).lower()}}});")
    for e in g.edges:
        src, dst = g.nodes[e.source], g.nodes[e.target]
        out.append(f"MATCH (a:{_label(src.kind)} {{id: {_cypher_str(e.source)}}}), "
                   f"(b:{_label(dst.kind)} {{id: {_cypher_str(e.target)}}}) "
                   f"MERGE (a)-[:{e.kind.upper()}]->(b);")
    return "\n".join(out) + "\n"


def render(g: Graph, fmt: str) -> str:
    """``g`` as text in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return json.dumps(to_json(g), indent=2, sort_keys=True) + "\n"
    if fmt == "dot":
        return _dot(g)
    if fmt == "graphml":
        return _graphml(g)
    if fmt == "cypher":
        return _cypher(g)
    raise ValueError(f"unknown graph format {fmt!r}; one of {', '.join(FORMATS)}")
