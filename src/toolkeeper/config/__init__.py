"""Config as code (SPEC §7): load, check and apply ``toolkeeper.yaml``.

``load_file``/``load_text`` validate the file with positions on every problem; ``check``
reports wiring violations (``toolkeeper check``); ``apply_config``/``apply_file`` sync it
into a gateway's store idempotently (``toolkeeper apply``); ``json_schema`` is the schema
published for editors.
"""

from typing import Any

from toolkeeper.config.apply import (
    ApplyReport,
    apply_config,
    apply_file,
    config_settings,
    secrets_store,
)
from toolkeeper.config.check import Rule, Violation, check, check_file
from toolkeeper.config.loader import load_file, load_text
from toolkeeper.config.model import ConfigFile


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``toolkeeper.yaml`` (see :mod:`toolkeeper.config.schema`)."""
    # imported here so ``python -m toolkeeper.config.schema`` does not import itself twice
    from toolkeeper.config.schema import json_schema as generate

    return generate()


__all__ = [
    "ApplyReport",
    "ConfigFile",
    "Rule",
    "Violation",
    "apply_config",
    "apply_file",
    "check",
    "check_file",
    "config_settings",
    "json_schema",
    "load_file",
    "load_text",
    "secrets_store",
]
