"""reference/config.md: every key of ``toolkeeper.yaml``, from the JSON Schema shipped with
the package (``toolkeeper/config/toolkeeper.schema.json``, itself generated from the config
models): the top-level keys, then each object type the schema defines."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ._attrdocs import describe
from ._md import GENERATED, cell, code, properties_table

INTRO = """# Configuration (`toolkeeper.yaml`)

A config file is applied with `toolkeeper apply -f FILE` (or synced at start by
`toolkeeper serve --config FILE`); `toolkeeper check -f FILE` checks its wiring and
`toolkeeper init` writes a commented starter. Editors can validate it against the JSON
Schema shipped as `toolkeeper/config/toolkeeper.schema.json` (`$id` below). This page is
generated from that schema: the top-level keys first, then each type they refer to.

"""


def schema() -> dict[str, Any]:
    """The packaged JSON Schema of ``toolkeeper.yaml``, each key without a description given
    its field's docstring from the config models."""
    from toolkeeper.config.model import ConfigFile

    text = resources.files("toolkeeper.config").joinpath("toolkeeper.schema.json").read_text(
        encoding="utf-8")
    return describe(dict(json.loads(text)), ConfigFile)


def anchor(name: str) -> str:
    """The heading id of a ``$defs`` type."""
    return "type-" + name.lower()


def link(name: str) -> str:
    return f"[{code(name)}](#{anchor(name)})"


def _definition(name: str, body: dict[str, Any]) -> str:
    parts = [f"### {name} {{#{anchor(name)}}}\n\n"]
    if body.get("description"):
        parts.append(body["description"].strip() + "\n\n")
    if "properties" in body:
        parts.append(properties_table(body, link))
        if body.get("additionalProperties") is False:
            parts.append("\nNo other keys are accepted.\n")
    elif "enum" in body:
        parts.append("One of: " + ", ".join(code(json.dumps(v)) for v in body["enum"]) + ".\n")
    else:
        parts.append(cell(json.dumps(body)) + "\n")
    return "".join(parts) + "\n"


def render() -> str:
    """The page."""
    doc = schema()
    head = [f"Schema `$id`: `{doc.get('$id', '')}` ({doc.get('$schema', '')}).\n\n",
            "## Top-level keys\n\n", properties_table(doc, link), "\n## Types\n\n"]
    defs = doc.get("$defs", {})
    return GENERATED + INTRO + "".join(head) + "".join(
        _definition(name, defs[name]) for name in sorted(defs))
