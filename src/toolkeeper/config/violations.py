"""The vocabulary of ``toolkeeper check``: stable rule names and the violation record."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Rule(StrEnum):
    """Stable names of the check rules."""

    CONFIG_INVALID = "config_invalid"
    UNKNOWN_PROFILE = "unknown_profile"
    UNKNOWN_TOOL = "unknown_tool"
    UNKNOWN_ACTION = "unknown_action"
    INVALID_POLICY = "invalid_policy"
    UNGATED_HIGH_RISK = "ungated_high_risk"
    NATIVE_INVALID = "native_invalid"
    ONLY_BESIDE_CONFIG = "only_beside_config"
    INVALID_DEFINITION = "invalid_definition"
    POLICY_MODEL_MISSING = "policy_model_missing"
    TESTS_MISSING = "tests_missing"
    FUNCTION_INVALID = "function_invalid"
    FUNCTION_NOT_ALLOWED = "function_not_allowed"
    NAME_COLLISION = "name_collision"
    LITERAL_SECRET = "secret_literal_refused"  # the REST reason code too
    DUPLICATE_TOOL = "duplicate_tool"
    DUPLICATE_PROFILE = "duplicate_profile"
    DUPLICATE_AGENT = "duplicate_agent"
    ADJUSTER_NO_EFFECT = "adjuster_no_effect"
    GATE_LOOSER_THAN_TENANT = "gate_looser_than_tenant"
    ARTIFACT_NOT_INSTALLED = "artifact_not_installed"
    COMPENSATION_TARGET_MISSING = "compensation_target_missing"
    TOOL_NOT_ACTIVATED = "tool_not_activated"
    AGENT_CALL_CYCLE = "agent_call_cycle"  # the runtime reason code too


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken wiring rule, at the YAML node that breaks it."""

    rule: str
    """A :class:`Rule` value."""
    message: str
    """What is wrong and, where it helps, how to fix it."""
    path: str
    """The offending node, e.g. ``profiles[0].activations[1].tool``."""
    line: int | None
    """1-based line of that node (``None`` when the config was not loaded from a file)."""
    column: int | None = None
    """1-based column of that node."""
    file: str | None = None
    """The config file."""

    def __str__(self) -> str:
        where = self.file or "<config>"
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        return f"{where}: [{self.rule}] {self.path}: {self.message}"
