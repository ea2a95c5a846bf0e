"""Upstream MCP server settings (config ``servers:``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.secrets.base import parse_ref

SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"


class ToolOverride(BaseModel):
    """What the operator says about one upstream tool (upstream annotations are untrusted)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    side_effect: SideEffect | None = None
    risk: Risk | None = None
    requires_confirmation: bool | None = None
    scopes_required: tuple[str, ...] | None = None
    task_support: Literal["forbidden", "optional", "required"] | None = None
    """Over MCP with the tasks extension: run this tool's calls as toolkeeper's tasks
    (the upstream sees a plain call; its questions park the task ``input_required``)."""


class UpstreamOAuth(BaseModel):
    """OAuth to an upstream (an MCP server's or an ``http`` tool's ``oauth:`` block): the
    gateway gets an access token from the authorization server and sends it as ``Bearer``
    (``toolkeeper.identity.upstream``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_endpoint: str | None = Field(default=None, description=(
        "The authorization server's token endpoint (else discovered from ``issuer``)."))
    issuer: str | None = Field(default=None, description=(
        "Discover ``token_endpoint`` from ``{issuer}/.well-known/oauth-authorization-server``"
        " (then ``openid-configuration``); bounded, once per process."))
    client_id: str = Field(min_length=1, max_length=256)
    client_secret: str | None = Field(default=None, description=(
        "A ``${secret:connector/key}`` reference, never the secret itself; sent with HTTP "
        "Basic (``client_secret_basic``)."))
    grant: Literal["client_credentials", "token_exchange"] = "client_credentials"
    subject: Literal["agent", "approver"] | None = Field(default=None, description=(
        "token_exchange: whose token is exchanged: ``agent`` (the calling agent's own OAuth "
        "access token; it goes to the authorization server only) or ``approver`` (the token of "
        "the person who approved the call, signed in to the console; a call without such an "
        "approval stops)."))
    scope: str | None = None
    resource: str | None = Field(default=None, description="RFC 8707 resource indicator.")
    audience: str | None = Field(default=None, description="token_exchange: ``audience``.")
    timeout_s: float = Field(default=10.0, gt=0, le=60, description=(
        "Deadline of one token request (connect, send, read)."))
    refresh_skew_s: float = Field(default=30.0, ge=0, le=3600, description=(
        "A token is renewed this long before it expires."))

    @field_validator("client_secret")
    @classmethod
    def _reference_only(cls, value: str | None) -> str | None:
        if value is not None and parse_ref(value) is None:
            raise ValueError("`client_secret` must be one ${secret:connector/key} reference, "
                             "never the secret itself")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> UpstreamOAuth:
        if (self.token_endpoint is None) == (self.issuer is None):
            raise ValueError("oauth: give exactly one of `token_endpoint` or `issuer`")
        for name in ("token_endpoint", "issuer"):
            url = getattr(self, name)
            if url is not None and not url.lower().startswith(("https://", "http://")):
                raise ValueError(f"oauth: `{name}` must be an http(s) URL")
        if self.grant == "token_exchange":
            if self.subject is None:
                raise ValueError("oauth: token_exchange needs `subject: agent` or "
                                 "`subject: approver`")
        elif self.subject is not None:
            raise ValueError("oauth: `subject` applies to grant token_exchange only")
        return self


class ServerConfig(BaseModel):
    """One upstream MCP server (config ``servers:``): a stdio command or a URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SERVER_NAME, description=(
        "The server's name; also the prefix of what it offers (``{server}_{tool}``)."))
    prefix: str | None = Field(default=None, pattern=r"^([A-Za-z0-9][A-Za-z0-9_-]{0,31})?$",
                               description=(
        "What the imported tools' and prompts' names start with (``{prefix}_{tool}``); "
        "``null`` (default): the server's ``name``; ``\"\"``: no prefix, the upstream's own "
        "names (a gateway in front of one server; a clash with another tool is not listed)."))
    command: tuple[str, ...] | None = Field(default=None, description=(
        "stdio: the program and its arguments."))
    env: dict[str, str] = Field(default_factory=dict, description=(
        "stdio: extra environment (values may be ``${secret:…}``)."))
    cwd: str | None = None
    url: str | None = Field(default=None, description="Streamable HTTP endpoint.")
    headers: dict[str, str] = Field(default_factory=dict, description=(
        "HTTP: headers sent on every request (values may be ``${secret:…}``)."))
    oauth: UpstreamOAuth | None = Field(default=None, description=(
        "HTTP: get an OAuth access token and send it as ``Authorization: Bearer``."))
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
        if self.oauth is not None and self.url is None:
            raise ValueError(f"server {self.name!r}: `oauth` applies to `url` servers only")
        return self

    def local(self, upstream_name: str) -> str:
        """The gateway's name for what this server calls ``upstream_name``."""
        return local_name(self.name if self.prefix is None else self.prefix, upstream_name)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def local_name(prefix: str, tool: str) -> str:
    """``{prefix}_{tool}`` (``tool`` alone for an empty prefix), made a valid tool/MCP name
    (MCP's rule: characters outside ``[A-Za-z0-9_.-]`` and a leading dot → ``_``; cut at
    128)."""
    name = _UNSAFE.sub("_", f"{prefix}_{tool}" if prefix else tool)[:128]
    return "_" + name[1:] if name.startswith(".") else name
