"""What ``POST /tools`` and ``PUT /tools/{id}`` accept, and how such a body becomes a
definition (the REST side of the registry; how tools go out is
:mod:`toolkeeper.services.tool_views`)."""

from __future__ import annotations

from typing import Any, Literal

import jsonschema_rs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolkeeper.api.errors import ApiError
from toolkeeper.builtins import BUILTINS, definition
from toolkeeper.model.enums import Risk, SideEffect, ToolStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import (
    ActionSpec,
    Compensation,
    Cost,
    ExecutionMeta,
    ImplementationType,
    ToolDefinition,
)


class ToolChanges(BaseModel):
    """``PUT /tools/{id}``: the fields to change on the working copy (others are kept).

    The name, tenant and version are not changed here (versions: ``POST …/version``)."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(default=None, max_length=4000)
    status: ToolStatus | None = None
    is_active: bool | None = None
    implementation_type: ImplementationType | None = None
    implementation_config: dict[str, Any] | None = None
    """Stored as ``config_schema.implementation``."""
    execution_config: ExecutionMeta | None = None
    """Stored as ``config_schema.execution``."""
    actions: dict[str, ActionSpec] | None = Field(default=None, max_length=200)
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    risk_default: Risk | None = None
    risk_map: dict[str, Risk] | None = None
    side_effect: SideEffect | None = None
    scopes_required: list[str] | None = Field(default=None, max_length=100)
    capabilities: list[str] | None = Field(default=None, max_length=100)
    categories: list[str] | None = Field(default=None, max_length=100)
    requires_confirmation: bool | None = None
    confirmation_prompt: str | None = Field(default=None, max_length=2000)
    compensation: dict[str, Compensation] | None = None
    idempotency_key_fields: list[str] | None = Field(default=None, max_length=50)
    connector_id: str | None = Field(default=None, max_length=200)
    artifact_id: str | None = Field(default=None, max_length=200)
    artifact_version: str | None = Field(default=None, max_length=64)
    policy: dict[str, Any] | None = None
    """Tool-level policy defaults."""
    costs: dict[str, Cost] | None = Field(default=None, max_length=200)
    """Action (or ``*``) → what one call costs budgets (docs/guides/budgets.md)."""

    def fields(self) -> dict[str, Any]:
        """The set fields under ToolDefinition's names."""
        data = self.model_dump(exclude_unset=True)
        if "implementation_config" in data:
            data["implementation"] = data.pop("implementation_config")
        if "execution_config" in data:
            data["execution"] = data.pop("execution_config")
        return data


class ToolCreate(ToolChanges):
    """``POST /tools``: a new tenant tool (created as a draft)."""

    name: str = Field(max_length=64)
    scope: Literal["tenant", "global"] = "tenant"
    """Only ``tenant``: global tools come from configuration, not from a tenant."""
    version: str = Field(default="1.0.0", max_length=64)

    def fields(self) -> dict[str, Any]:
        data = super().fields()
        data.pop("scope", None)
        return data


_TEMPLATE_FIELDS = ("description", "actions", "input_schema", "output_schema", "risk_default",
                   "risk_map", "side_effect", "idempotency_key_fields", "compensation",
                   "execution", "requires_confirmation", "capabilities", "scopes_required")
"""What a tenant's ``builtin`` tool takes from its built-in unless the body sets it."""


def with_builtin_template(data: dict[str, Any]) -> dict[str, Any]:
    """A body creating a ``builtin`` tool, completed from the built-in's own definition (its
    actions and their schemas, side effects, risks, execution and compensation), so a tenant
    names the built-in and its policy and gets the declared behaviour, not a bare shell.
    Fields the body sets win; an unknown ``builtin_key`` is left for the factory to refuse."""
    if data.get("implementation_type") != "builtin":
        return data
    key = str((data.get("implementation") or {}).get("builtin_key", ""))
    if key not in BUILTINS:
        return data
    template = definition(key).model_dump(include=set(_TEMPLATE_FIELDS))
    merged = {**template, "builtin_key": key, **data}
    # a risk named for one action keeps the built-in's risks of the others
    merged["risk_map"] = {**template["risk_map"], **(data.get("risk_map") or {})}
    return merged


def build_definition(data: dict[str, Any]) -> ToolDefinition:
    """A validated definition whose schemas compile; 422 ``invalid_arguments`` otherwise."""
    try:
        tool = ToolDefinition.model_validate(data)
    except ValidationError as exc:
        errors = [{"pointer": "/" + "/".join(str(p) for p in e["loc"]), "message": e["msg"]}
                  for e in exc.errors()]
        raise ApiError(422, Reason.INVALID_ARGUMENTS, "the tool definition is invalid",
                       {"errors": errors}) from exc
    schemas = {"input_schema": tool.input_schema, "output_schema": tool.output_schema}
    for name, spec in tool.actions.items():
        schemas[f"actions/{name}/input_schema"] = spec.input_schema
        schemas[f"actions/{name}/output_schema"] = spec.output_schema
    for where, schema in schemas.items():
        if schema is None:
            continue
        try:
            jsonschema_rs.Draft202012Validator(schema)
        except ValueError as exc:
            raise ApiError(422, Reason.INVALID_ARGUMENTS, f"{where} is not a valid JSON "
                           f"Schema: {exc}", {"pointer": f"/{where}"}) from exc
    return tool
