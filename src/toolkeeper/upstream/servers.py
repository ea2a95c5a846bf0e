"""Upstream MCP server settings (config ``servers:``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkeeper.model.enums import Risk, SideEffect

SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"


class ToolOverride(BaseModel):
    """What the operator says about one upstream tool (upstream annotations are untrusted)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    side_effect: SideEffect | None = None
    risk: Risk | None = None
    requires_confirmation: bool | None = None
    scopes_required: tuple[str, ...] | None = None


class ServerConfig(BaseModel):
    """One upstream MCP server (config ``servers:``): a stdio command or a URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SERVER_NAME, description=(
        "Prefix of the imported tools' names (``{server}_{tool}``)."))
    command: tuple[str, ...] | None = Field(default=None, description=(
        "stdio: the program and its arguments."))
    env: dict[str, str] = Field(default_factory=dict, description=(
        "stdio: extra environment (values may be ``${secret:…}``)."))
    cwd: str | None = None
    url: str | None = Field(default=None, description="Streamable HTTP endpoint.")
    headers: dict[str, str] = Field(default_factory=dict, description=(
        "HTTP: headers sent on every request (values may be ``${secret:…}``)."))
    tenant: str | None = Field(default=None, description=(
        "Tenant owning the imported tools; ``null`` (default) makes them global."))
    timeout_s: float = Field(default=30.0, gt=0, le=3600, description=(
        "Per-call deadline (the imported tools' ``execution.timeout_s``)."))
    connect_timeout_s: float = Field(default=15.0, gt=0, le=600)
    include: tuple[str, ...] | None = Field(default=None, description=(
        "Import only these upstream tools (``None``: all)."))
    side_effect: SideEffect = Field(default=SideEffect.IRREVERSIBLE, description=(
        "Of every imported tool unless ``tools`` says otherwise."))
    risk: Risk = Risk.MEDIUM
    tools: dict[str, ToolOverride] = Field(default_factory=dict, description=(
        "Per upstream tool name: side effect, risk, confirmation, scopes."))

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"server {self.name!r}: give exactly one of `command` or `url`")
        if self.command is not None and not self.command:
            raise ValueError(f"server {self.name!r}: `command` is empty")
        return self
