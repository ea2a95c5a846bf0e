"""The JSON Schema of ``toolkeeper.yaml`` (draft 2020-12), for editors and CI.

A copy is committed as ``toolkeeper.schema.json`` next to this module (shipped as package
data); regenerate it after changing the config models with::

    python -m toolkeeper.config.schema > src/toolkeeper/config/toolkeeper.schema.json
"""

from __future__ import annotations

import json
from typing import Any

from toolkeeper.config.model import MANAGED_FIELDS, ConfigFile

SCHEMA_ID = "https://toolkeeper.dev/schema/toolkeeper.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict[str, Any]:
    """The schema generated from :class:`ConfigFile` (validation mode)."""
    body = ConfigFile.model_json_schema(mode="validation")
    defs = body["$defs"]
    # the registry owns these; the model refuses them, so editors should not offer them
    entry = defs["DefinitionEntry"]
    for name in MANAGED_FIELDS:
        entry["properties"].pop(name, None)
    defs["Profile"]["properties"].pop("origin", None)  # a file's profiles are "config"
    # mapping keys are strings in JSON: autonomy levels as keys are "0".."3"
    levels = [str(v) for v in defs["Autonomy"]["enum"]]
    _replace(body, {"$ref": "#/$defs/Autonomy"}, {"enum": levels}, under="propertyNames")
    return {"$schema": DRAFT, "$id": SCHEMA_ID, "title": "toolkeeper.yaml",
            "description": "toolkeeper configuration as code (version 1).",
            **{k: v for k, v in body.items() if k not in ("title", "description")}}


def _replace(node: Any, old: dict[str, Any], new: dict[str, Any], *, under: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == under and value == old:
                node[key] = new
            else:
                _replace(value, old, new, under=under)
    elif isinstance(node, list):
        for item in node:
            _replace(item, old, new, under=under)


def render() -> str:
    """The schema as the committed file's text (stable key order, trailing newline)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")
