"""reference/rest.md: every path and method of the REST API, from the OpenAPI document the
app itself serves at ``/openapi.json`` (``toolkeeper.api.create_app``, built without a
gateway: the document needs no store), with its request and response schemas."""

from __future__ import annotations

import re
from typing import Any

from ._md import GENERATED, cell, code, default_of, properties_table, schema_type, table

METHODS = ("get", "put", "post", "patch", "delete", "head", "options")

INTRO = """# REST API

Every request carries `Authorization: Bearer <token>`: a toolkeeper token (`tk_…`) or an
OAuth access token of a configured identity provider; the token decides tenant, role and
agent. A running server serves the same document at `/openapi.json` and an interactive
explorer at `/docs`. This page is generated from that document.

"""


def document() -> dict[str, Any]:
    """The OpenAPI document of the REST app (every face mounted, no gateway)."""
    from toolkeeper.api import ApiSettings, create_app

    return dict(create_app(None, ApiSettings()).openapi())  # type: ignore[arg-type]


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(METHOD, path, operation)`` of every operation, in the document's order."""
    return [(method.upper(), path, op) for path, item in doc.get("paths", {}).items()
            for method, op in item.items() if method in METHODS]


def op_anchor(method: str, path: str) -> str:
    """The heading id of an operation: ``post-tools-tool_id-publish``."""
    return re.sub(r"[^a-z0-9_]+", "-", f"{method} {path}".lower()).strip("-")


def schema_anchor(name: str) -> str:
    return "schema-" + name.lower()


def link(name: str) -> str:
    return f"[{code(name)}](#{schema_anchor(name)})"


def _body_types(content: dict[str, Any]) -> str:
    return "; ".join(f"{code(media)}: {schema_type(c.get('schema', {}), link)}"
                     for media, c in content.items())


def _operation(method: str, path: str, op: dict[str, Any]) -> str:
    parts = [f"### `{method} {path}` {{#{op_anchor(method, path)}}}\n\n"]
    if op.get("summary"):
        parts.append(f"**{op['summary'].strip()}**\n\n")
    if op.get("description"):
        parts.append(op["description"].strip() + "\n\n")
    if not op.get("security") and "security" in op:
        parts.append("No token needed.\n\n")
    params = [[code(p["name"]), p.get("in", ""), "yes" if p.get("required") else "",
               schema_type(p.get("schema", {}), link), default_of(p.get("schema", {})),
               cell(p.get("description", ""))]
              for p in op.get("parameters", [])]
    if params:
        parts.append(table(["Parameter", "In", "Required", "Type", "Default", "Description"],
                           params)
                     + "\n")
    body = op.get("requestBody")
    if body:
        parts.append("Request body: " + _body_types(body.get("content", {})) + ".\n\n")
    rows, errors = [], []
    for status, answer in op.get("responses", {}).items():
        types = _body_types(answer.get("content", {}))
        if types.endswith(link("ErrorOut")) and status != "200":
            errors.append(status)
        else:
            rows.append([status, cell(answer.get("description", "")), types])
    if errors:
        rows.append([", ".join(errors), "the error shape", link("ErrorOut")])
    parts.append(table(["Status", "Meaning", "Body"], rows))
    return "".join(parts) + "\n"


def render() -> str:
    """The page."""
    doc = document()
    parts = [GENERATED, INTRO, f"Version {doc['info']['version']}, OpenAPI {doc['openapi']}.\n\n"]
    overview = doc["info"].get("description", "").strip()
    if overview:
        parts += ["## Overview\n\n", re.sub(r"^## ", "### ", overview, flags=re.M), "\n\n"]
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for method, path, op in operations(doc):
        groups.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    for tag, ops in groups.items():
        parts.append(f"## {tag[0].upper()}{tag[1:]}\n\n")
        parts.append(table(["Operation", "Summary"], [
            [f"[{code(f'{m} {p}')}](#{op_anchor(m, p)})", cell(o.get("summary", ""))]
            for m, p, o in ops]) + "\n")
        parts.extend(_operation(*o) for o in ops)
    parts.append("## Schemas\n\n")
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        parts.append(f"### {name} {{#{schema_anchor(name)}}}\n\n")
        if schema.get("description"):
            parts.append(schema["description"].strip() + "\n\n")
        parts.append((properties_table(schema, link) or schema_type(schema, link) + "\n")
                     + "\n")
    return "".join(parts)
