"""The published JSON Schema of toolkeeper.yaml matches the models and the example."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import yaml

from toolkeeper.config import json_schema
from toolkeeper.config.schema import render

SRC = Path(__file__).resolve().parents[2] / "src" / "toolkeeper" / "config"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "toolkeeper.yaml"


def test_committed_schema_is_up_to_date() -> None:
    committed = (SRC / "toolkeeper.schema.json").read_text(encoding="utf-8")
    assert committed == render(), (
        "toolkeeper.schema.json is stale; regenerate it with: python -m "
        "toolkeeper.config.schema > src/toolkeeper/config/toolkeeper.schema.json")


def test_schema_is_draft_2020_12_with_an_id() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith("toolkeeper.schema.json")
    assert schema["title"] == "toolkeeper.yaml"


def test_schema_accepts_the_example_and_rejects_typos() -> None:
    validator = jsonschema_rs.Draft202012Validator(json_schema())
    example = json.loads(json.dumps(yaml.safe_load(EXAMPLE.read_text()), default=str))
    assert list(validator.iter_errors(example)) == []
    assert not validator.is_valid({"version": 1, "profiles": [{"name": "p", "autonmy": 1}]})
    assert not validator.is_valid({"version": 1, "tools": [{"name": "w", "status": "draft"}]})
    assert not validator.is_valid({"version": 1, "tenants": {"t": {"gates": {"high": {
        "7": "allow"}}}}})
