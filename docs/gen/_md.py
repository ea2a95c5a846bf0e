"""Markdown pieces the reference generators share: table cells, tables, JSON Schema types."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

GENERATED = ("<!-- Generated from the code by docs/gen at build time: edit the code, "
             "not this page. -->\n")


def cell(text: object) -> str:
    """``text`` as one table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    """``text`` as inline code inside a table cell (backticks inside are doubled around)."""
    s = cell(text)
    if not s:
        return ""
    fence = "``" if "`" in s else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; an empty string when there are no rows."""
    body = [f"| {' | '.join(row)} |" for row in rows]
    if not body:
        return ""
    return "\n".join([f"| {' | '.join(head)} |", f"|{'---|' * len(head)}", *body]) + "\n"


def schema_type(schema: Mapping[str, Any], ref: Callable[[str], str] | None = None) -> str:
    """A short Markdown type of a JSON Schema: ``string``, ``array of Agent``, ``a | b``.

    ``ref`` turns a ``$ref`` target's name into Markdown (a link); plain name without it."""
    def name_of(target: str) -> str:
        short = target.rsplit("/", 1)[-1]
        return ref(short) if ref else code(short)

    if "$ref" in schema:
        return name_of(schema["$ref"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            parts = [schema_type(s, ref) for s in schema[key]]
            return " \\| ".join(dict.fromkeys(p for p in parts if p))
    if "enum" in schema:
        return "one of " + ", ".join(code(json.dumps(v)) for v in schema["enum"])
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " \\| ".join(code(k) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return "array of " + schema_type(items, ref) if isinstance(items, dict) else code("array")
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "map of " + code("string") + " to " + schema_type(
            schema["additionalProperties"], ref)
    return code(kind) if kind else "any"


def default_of(schema: Mapping[str, Any]) -> str:
    """The schema's default as inline JSON, or an empty cell."""
    if "default" not in schema:
        return ""
    return code(json.dumps(schema["default"], ensure_ascii=False))


def bounds(schema: Mapping[str, Any]) -> str:
    """The numeric or length bounds of a schema, as `` (≥ 1, ≤ 32)``; empty without any."""
    marks = [("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
             ("exclusiveMaximum", "<"), ("minLength", "length ≥"), ("maxLength", "length ≤"),
             ("minItems", "items ≥"), ("maxItems", "items ≤")]
    found = [f"{sign} {schema[key]}" for key, sign in marks if key in schema]
    return f" ({', '.join(found)})" if found else ""


def properties_table(schema: Mapping[str, Any],
                     ref: Callable[[str], str] | None = None) -> str:
    """One row per property of an object schema: name, type, default, and whether it is
    required and its description (those two columns only when some property has one)."""
    required = set(schema.get("required", ()))
    props = schema.get("properties", {})
    head = ["Key", "Type", "Default"]
    some_required = any(name in required for name in props)
    described = any(p.get("description") for p in props.values())
    head += ["Required"] * some_required + ["Description"] * described
    rows = []
    for name, prop in props.items():
        row = [code(name), schema_type(prop, ref) + bounds(prop), default_of(prop)]
        row += ["yes" if name in required else ""] * some_required
        row += [cell(prop.get("description", ""))] * described
        rows.append(row)
    return table(head, rows)


def json_block(value: Any, indent: str = "") -> str:
    """``value`` as a fenced JSON block, each line prefixed with ``indent``."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    lines = ["```json", *text.splitlines(), "```"]
    return "\n".join(indent + line for line in lines) + "\n"
