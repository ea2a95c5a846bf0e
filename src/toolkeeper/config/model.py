"""The shape of ``toolkeeper.yaml`` (SPEC §7 "Config as code") as pydantic models.

Every model forbids unknown keys, so a typo is an error with a position, never a silently
ignored guardrail. Profiles, agents, adjusters and limits are the model classes of
``toolkeeper.model`` themselves; a full tool definition is a ``ToolDefinition`` plus
``tenant``/``publish``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from toolkeeper.bounds import TenantBounds
from toolkeeper.builtins import BUILTINS
from toolkeeper.config._section import _Section
from toolkeeper.config.identity import IdentityConfig
from toolkeeper.model.enums import Mode
from toolkeeper.model.profile import Adjuster, Agent, GateOverrides, Limits, Profile
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.secrets.vault import VaultConfig
from toolkeeper.services.audit_export.config import AuditExportConfig
from toolkeeper.upstream.servers import ServerConfig

ENTRY_POINT_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
MANAGED_FIELDS = frozenset({"tenant_id", "status", "published_at", "definition_hash"})
"""ToolDefinition fields the registry owns; a config sets ``tenant``/``publish`` instead."""
OVERRIDABLE_FIELDS = frozenset(ToolDefinition.model_fields) - MANAGED_FIELDS
NodePath = tuple[str | int, ...]
"""Where a node sits in the file: mapping keys and sequence indexes from the root."""


def _global_tenant(value: str | None) -> str | None:
    return None if value in (None, "global") else value




class SecretsConfig(_Section):
    """Where ``${secret:connector/key}`` references are resolved at call time."""

    backend: Literal["env", "embedded", "vault"] = "env"
    """``env``: ``TOOLKEEPER_SECRET_<CONNECTOR>__<KEY>`` variables; ``embedded``: encrypted
    in the gateway's database; ``vault``: Vault/OpenBao KV v2 (``vault:``)."""
    key_file: str | None = None
    """Embedded only: file holding the base64 master key, relative to the config file
    (``TOOLKEEPER_SECRETS_KEY`` wins when set)."""
    vault: VaultConfig | None = None
    """Vault only: address, mount, path prefix, auth, cache (files relative to the file)."""

    @model_validator(mode="after")
    def _key_file_for_embedded(self) -> SecretsConfig:
        if self.key_file is not None and self.backend != "embedded":
            raise ValueError("key_file is only used by the embedded backend")
        if self.vault is not None and self.backend != "vault":
            raise ValueError("vault is only used by the vault backend")
        return self


class SettingsConfig(_Section):
    """Gateway settings (``toolkeeper.pipeline.runtime.Settings``); durations in seconds."""

    approval_ttl_s: float | None = Field(default=None, gt=0)
    """How long an approval stays valid (default 86400)."""
    outcome_ttl_s: float | None = Field(default=None, gt=0)
    """How long outcome records are kept (default 86400)."""
    outcome_retention_s: float | None = Field(default=None, ge=0)
    """How long a finished outcome stays readable after its TTL before it is deleted
    (default 86400)."""
    audit_retention_s: float | None = Field(default=None, gt=0)
    """Delete audit events older than this from the start of each chain (default: keep
    every event); the chains stay verifiable (docs/audit-integrity.md)."""
    retention_every_s: float | None = Field(default=None, gt=0)
    """How often the retention sweeps run (default 300)."""
    stale_grace_s: float | None = Field(default=None, ge=0)
    """Added to a tool's timeout before an in_progress outcome is presumed dead."""
    max_payload_bytes: int | None = Field(default=None, ge=1)
    """Argument payload cap (``payload_too_large``)."""
    mcp_resync_s: float | None = Field(default=None, ge=1)
    """How often upstream MCP servers are listed again for drift (default 300)."""
    audit_level: Literal["decisions", "steps"] | None = None
    """``decisions`` audits decisions and outcomes; ``steps`` also pass-through steps."""
    audit_arguments: bool | None = None
    audit_durability: Literal["transactional", "batched"] | None = None
    """Store (redacted) arguments in audit events, not only their digest."""
    recent_calls_max: int | None = Field(default=None, ge=0)
    """Calls kept per tenant in the recent-calls log (default 1000; 0 keeps none)."""
    call_stats: bool | None = None
    """Count finished calls per minute and hour for the console's overview (default
    true; minute counts kept 2 days, hour counts 35 days or the audit retention)."""
    max_pending_approvals: int | None = Field(default=None, ge=0)
    """Approvals one agent may have waiting at once (default 1000; 0: no cap); past it a
    call that needs one more stops with ``approvals_pending_limit``."""
    tenant_bounds: TenantBounds | None = None
    """The ceiling for host paths, networks and commands a tenant sets through the REST
    API; by default a tenant may widen none of them."""


Scalar = str | int | float | bool


class RetrievalDocumentConfig(_Section):
    """A document ingested into its pipeline once (again only when its text changes)."""

    text: str | None = Field(default=None, min_length=1)
    """The document's text (or ``file``)."""
    file: str | None = Field(default=None, min_length=1)
    """A UTF-8 text file, relative to the config file (or ``text``)."""
    source: str | None = Field(default=None, max_length=1000)
    """Returned with each chunk (default: ``file``)."""
    metadata: dict[str, Scalar] = Field(default_factory=dict)
    """Key -> string, number or boolean; queries filter on equality."""

    @model_validator(mode="after")
    def _one_body(self) -> RetrievalDocumentConfig:
        if (self.text is None) == (self.file is None):
            raise ValueError("a document has exactly one of `text` or `file`")
        return self


class RetrievalPipelineConfig(_Section):
    """A tenant's retrieval pipeline (created when absent; never deleted by apply)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    """Unique in its tenant; ``rag_retrieval`` tools and the ``retrieval`` built-in name
    a pipeline by this name or its id."""
    tenant: str = "default"
    description: str = Field(default="", max_length=2000)
    chunk_chars: int = Field(default=800, ge=100, le=20_000)
    """Characters per chunk (a chunk ends at a space when it can)."""
    chunk_overlap: int = Field(default=100, ge=0)
    """Characters a chunk repeats from the previous one (at most half of ``chunk_chars``)."""
    documents: list[RetrievalDocumentConfig] = Field(default_factory=list)
    """Documents to ingest (those already there with the same source and text are kept)."""


class RetrievalConfig(_Section):
    """Retrieval pipelines and their limits (SQLite FTS5 / PostgreSQL full-text search)."""

    max_top_k: int | None = Field(default=None, ge=1)
    """The most chunks one query returns (default 50; a policy may lower it)."""
    max_document_chars: int | None = Field(default=None, ge=1)
    """The longest document one ingest accepts (default 200000)."""
    max_batch_documents: int | None = Field(default=None, ge=1)
    """The most documents one ingest accepts (default 100)."""
    pipelines: list[RetrievalPipelineConfig] = Field(default_factory=list)


class TenantConfig(_Section):
    """Tenant-wide policy: gate matrix overrides, risk adjusters, limits."""

    gates: GateOverrides = Field(default_factory=dict)
    """risk -> autonomy -> gate, layered over the default matrix."""
    adjusters: tuple[Adjuster, ...] = ()
    """Raise a call's risk when conditions hold (never lower it)."""
    limits: Limits = Field(default_factory=Limits)
    """Rate limits and call caps for the whole tenant."""


def _check_overrides(value: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(value) - OVERRIDABLE_FIELDS)
    if unknown:
        raise ValueError(f"not overridable tool field(s): {', '.join(unknown)}")
    return value


class BuiltinEntry(_Section):
    """A shipped built-in tool, installed as a global system tool."""

    builtin: str
    """A ``toolkeeper.builtins.BUILTINS`` key (``git``, ``calculate``…)."""
    policy: dict[str, Any] = Field(default_factory=dict)
    """Tool-level policy defaults (fields of the tool's policy model)."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Any ToolDefinition field (``risk_map``, ``requires_confirmation``…)."""
    publish: bool = True
    """Publish the definition (a draft only runs in debug mode)."""

    @field_validator("builtin")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in BUILTINS:
            raise ValueError(f"no built-in {value!r}; known: {', '.join(sorted(BUILTINS))}")
        return value

    _overrides_ok = field_validator("overrides")(_check_overrides)

    @property
    def tenant(self) -> str | None:
        """Built-ins are global."""
        return None


class NativeEntry(_Section):
    """A native tool: a BaseTool class or ``@tool`` function referenced as ``module:Name``."""

    native: str = Field(pattern=ENTRY_POINT_RE.pattern)
    """Entry point ``module.path:Name``; importable from the config file's directory."""
    tenant: str | None = "default"
    """Owning tenant; ``null`` or ``global`` makes a global tool."""
    publish: bool = True
    """Publish the definition (a draft only runs in debug mode)."""
    policy: dict[str, Any] = Field(default_factory=dict)
    """Tool-level policy defaults (same as ``overrides.policy``)."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Any ToolDefinition field."""

    _tenant_ok = field_validator("tenant")(_global_tenant)
    _overrides_ok = field_validator("overrides")(_check_overrides)


class DefinitionEntry(ToolDefinition):
    """A full tool definition (http, function, mcp… tools): ToolDefinition fields plus
    ``tenant`` and ``publish``; lifecycle fields are the registry's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str | None = "default"
    """Owning tenant; ``null`` or ``global`` makes a global tool."""
    publish: bool = True
    """Publish the definition (a draft only runs in debug mode)."""

    _tenant_ok = field_validator("tenant")(_global_tenant)

    @model_validator(mode="before")
    @classmethod
    def _no_managed_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            managed = sorted(MANAGED_FIELDS & set(data))
            if managed:
                raise ValueError(f"{', '.join(managed)}: managed by the registry; "
                                 "use `tenant:` and `publish:` instead")
        return data

    def to_definition(self) -> ToolDefinition:
        """The plain ToolDefinition this entry describes, owned by ``tenant``."""
        fields = self.model_dump(exclude={"tenant", "publish"} | MANAGED_FIELDS)
        return ToolDefinition.model_validate({**fields, "tenant_id": self.tenant})


def _entry_kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        value = {"builtin": 1} if isinstance(value, BuiltinEntry) else (
            {"native": 1} if isinstance(value, NativeEntry) else {"name": 1})
    if not isinstance(value, dict):
        return None
    kinds = [k for k in ("builtin", "native", "name") if k in value]
    if len(kinds) != 1:
        return None
    return {"builtin": "builtin", "native": "native", "name": "definition"}[kinds[0]]


ToolEntry = Annotated[
    Annotated[BuiltinEntry, Tag("builtin")]
    | Annotated[NativeEntry, Tag("native")]
    | Annotated[DefinitionEntry, Tag("definition")],
    Discriminator(_entry_kind, custom_error_type="tool_entry_kind",
                  custom_error_message="a tool entry needs exactly one of `builtin`, "
                  "`native` or `name`"),
]
TOOL_ENTRY_TAGS = frozenset({"builtin", "native", "definition"})



class ArtifactsConfig(_Section):
    """Where the operator installs code artifacts (``artifact`` tools)."""

    dir: str = Field(min_length=1)
    """Directory of artifacts, each a sub-directory with ``artifact.json`` (relative to
    this file)."""


class ConfigFile(BaseModel):
    """The whole ``toolkeeper.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True,
                              title="toolkeeper.yaml")

    version: Literal[1]
    """Format version of this file."""
    mode: Mode | None = None
    """``production`` runs published tools only; ``debug`` also drafts."""
    database: str | None = None
    """SQLAlchemy URL of the store (``TOOLKEEPER_DATABASE_URL`` wins)."""
    secrets: SecretsConfig | None = None
    """Secrets backend for ``${secret:connector/key}`` references."""
    settings: SettingsConfig = Field(default_factory=SettingsConfig)
    """Gateway settings."""
    functions: dict[str, Annotated[str, Field(pattern=ENTRY_POINT_RE.pattern)]] = Field(
        default_factory=dict)
    """Allow-list for ``function`` tools: name -> ``module:callable``."""
    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    """Tenant-wide policy by tenant id."""
    artifacts: ArtifactsConfig | None = None
    """The operator's code artifacts (run by ``implementation_type: artifact`` tools)."""
    tools: list[ToolEntry] = Field(default_factory=list)
    """Built-in, native and fully defined tools."""
    servers: list[ServerConfig] = Field(default_factory=list)
    """Upstream MCP servers whose tools are imported as ``{server}_{tool}`` (hash-pinned)."""
    profiles: list[Profile] = Field(default_factory=list)
    """What agents may do: activations, scopes, autonomy, gates, adjusters, limits."""
    agents: list[Agent] = Field(default_factory=list)
    """Caller identities, each bound to one profile."""
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    """Retrieval pipelines (with documents) and query/ingest limits."""
    audit_export: AuditExportConfig | None = None
    """Audit sinks (OTLP logs, Splunk HEC, Elasticsearch bulk) fed from the committed chain."""
    identity: IdentityConfig | None = None
    """Who may call besides ``tk_…`` tokens: OAuth issuers whose access tokens are accepted,
    and the console's single sign-on (read at start; a change needs a restart)."""

    _source: str | None = PrivateAttr(default=None)
    _positions: dict[NodePath, tuple[int, int]] = PrivateAttr(default_factory=dict)

    @property
    def source(self) -> str | None:
        """The file this config was loaded from (``None`` when built in code)."""
        return self._source

    def position(self, path: NodePath) -> tuple[int, int] | None:
        """1-based (line, column) of the node at ``path``, or of its nearest ancestor."""
        for end in range(len(path), -1, -1):
            pos = self._positions.get(path[:end])
            if pos is not None:
                return pos
        return None


def render_path(path: NodePath) -> str:
    """``("profiles", 0, "autonomy")`` -> ``profiles[0].autonomy``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"
