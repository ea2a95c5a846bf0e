"""The one schema (SQLAlchemy Core), shared by SQLite and PostgreSQL; Alembic mirrors it."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

GLOBAL_TENANT = "*"
"""Key used where a tenant column must be non-null: global (system) records."""

ID = 64
NAME = 200

tenants = Table(
    "tenants", metadata,
    Column("id", String(ID), primary_key=True),
    Column("name", String(NAME), nullable=False),
    Column("settings", JSON, nullable=False, default=dict),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

tools = Table(
    "tools", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant_key", String(ID), nullable=False),
    Column("name", String(NAME), nullable=False),
    Column("version", String(64), nullable=False),
    Column("status", String(32), nullable=False),
    Column("is_active", Boolean, nullable=False),
    Column("definition", JSON, nullable=False),
    Column("definition_hash", String(80), nullable=False),
    Column("published_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("tenant_key", "name", name="uq_tools_tenant_name"),
)

tool_versions = Table(
    "tool_versions", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tool_id", String(ID), nullable=False),
    Column("version", String(64), nullable=False),
    Column("snapshot", JSON, nullable=False),
    Column("definition_hash", String(80), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("tool_id", "version", name="uq_tool_versions"),
)

profiles = Table(
    "profiles", metadata,
    Column("tenant_id", String(ID), primary_key=True),
    Column("name", String(NAME), primary_key=True),
    Column("definition", JSON, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

agents = Table(
    "agents", metadata,
    Column("tenant_id", String(ID), primary_key=True),
    Column("name", String(NAME), primary_key=True),
    Column("profile", String(NAME), nullable=False),
    Column("definition", JSON, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

settings = Table(
    "settings", metadata,
    Column("key", String(NAME), primary_key=True),
    Column("value", JSON, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

tokens = Table(
    "tokens", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("role", String(32), nullable=False),
    Column("agent", String(NAME)),
    Column("label", String(NAME), nullable=False),
    Column("hash", String(128), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True)),
)

outcomes = Table(
    "outcomes", metadata,
    Column("call_id", String(ID), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("agent", String(NAME), nullable=False),
    Column("key", String(512), nullable=False),
    Column("tool", String(NAME), nullable=False),
    Column("action", String(NAME), nullable=False),
    Column("tool_version", String(64), nullable=False),
    Column("args_digest", String(80), nullable=False),
    Column("side_effect", String(32), nullable=False),
    Column("state", String(32), nullable=False),
    Column("status", String(32), nullable=False),
    Column("reason", String(NAME)),
    Column("result", JSON),
    Column("turn_group_id", String(NAME)),
    Column("resolved_by", String(NAME)),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("stale_after", DateTime(timezone=True), nullable=False),
    UniqueConstraint("tenant_id", "agent", "key", name="uq_outcomes_key"),
    # only running calls are indexed for crash recovery; finished rows leave the index
    Index("ix_outcomes_in_progress", "stale_after",
          sqlite_where=text("state = 'in_progress'"),
          postgresql_where=text("state = 'in_progress'")),
    Index("ix_outcomes_tenant_created", "tenant_id", "created_at"),
    # finished rows by expiry, for the retention sweep (running calls are never purged)
    Index("ix_outcomes_finished_expires", "expires_at",
          sqlite_where=text("state IN ('succeeded', 'failed')"),
          postgresql_where=text("state IN ('succeeded', 'failed')")),
    # outcomes a person must resolve, per tenant (the console's overview)
    Index("ix_outcomes_unknown", "tenant_id", "created_at",
          sqlite_where=text("state = 'unknown'"), postgresql_where=text("state = 'unknown'")),
)

approvals = Table(
    "approvals", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("agent", String(NAME), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("tool", String(NAME), nullable=False),
    Column("action", String(NAME), nullable=False),
    Column("tool_version", String(64), nullable=False),
    Column("args_digest", String(80), nullable=False),
    Column("arguments", JSON),
    Column("risk", String(16), nullable=False),
    Column("gate", String(16), nullable=False),
    Column("policy_version", String(80), nullable=False),
    Column("status", String(16), nullable=False),
    Column("call_id", String(ID)),
    Column("decided_by", String(NAME)),
    Column("decided_by_subject", String(NAME)),
    Column("decided_by_issuer", String(2000)),
    Column("decided_at", DateTime(timezone=True)),
    Column("note", Text),
    Column("edited_digest", String(80)),
    Column("edited_arguments", JSON),
    Column("consumed_by", String(ID)),
    Column("preview", JSON),
    Column("summary", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_approvals_tenant_status", "tenant_id", "status"),
    # covers the overview's reads of a window (no table row is visited)
    Index("ix_approvals_tenant_created", "tenant_id", "created_at", "kind", "status",
          "expires_at", "decided_at"),
    Index("ix_approvals_call", "call_id"),
    Index("ix_approvals_consumed_by", "consumed_by"),
)

side_effects = Table(
    "side_effects", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("agent", String(NAME), nullable=False),
    Column("call_id", String(ID), nullable=False),
    Column("tool", String(NAME), nullable=False),
    Column("action", String(NAME), nullable=False),
    Column("tool_version", String(64), nullable=False),
    Column("policy", String(32), nullable=False),
    Column("arguments", JSON),
    Column("result", JSON),
    Column("status", String(32), nullable=False),
    Column("turn_group_id", String(NAME)),
    Column("compensation_call_id", String(ID)),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_side_effects_tenant_turn", "tenant_id", "turn_group_id"),
    Index("ix_side_effects_call", "call_id"),
)

superseded_turns = Table(
    "superseded_turns", metadata,
    Column("tenant_id", String(ID), primary_key=True),
    Column("turn_group_id", String(NAME), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# The chain position is the key: one B-tree (WITHOUT ROWID on SQLite), no surrogate id.
# event_id is unique by construction (process prefix + counter) and not indexed: every
# index is another page written by each call's commit.
audit_events = Table(
    "audit_events", metadata,
    Column("tenant_key", String(ID), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("event_id", String(ID), nullable=False),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("type", String(64), nullable=False),
    Column("agent_id", String(NAME)),
    Column("call_id", String(ID)),
    Column("trace_id", String(NAME)),
    Column("task_id", String(NAME)),
    Column("step_id", String(NAME)),
    Column("turn_group_id", String(NAME)),
    Column("tool", String(NAME)),
    Column("action", String(NAME)),
    Column("tool_version", String(64)),
    Column("risk", String(16)),
    Column("gate", String(16)),
    Column("reason", String(NAME)),
    Column("duration_ms", Float),
    Column("data", JSON, nullable=False),
    Column("prev_hash", String(80), nullable=False),
    Column("hash", String(80), nullable=False),
    Index("ix_audit_call", "call_id"),
    sqlite_with_rowid=False,
)

audit_heads = Table(
    "audit_heads", metadata,
    Column("tenant_key", String(ID), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("hash", String(80), nullable=False),
    Column("mac", String(80)),
    # HMAC of (tenant_key, seq, hash[, base_seq, base_hash]) under the audit key; NULL when
    # written unkeyed
    Column("base_seq", BigInteger, nullable=False, server_default=text("0")),
    Column("base_hash", String(80)),
    # audit retention deleted the events up to base_seq; base_hash is the last one's hash
    # (the chain now starts after it). 0/NULL: nothing deleted, the chain starts at genesis.
)

secret_blobs = Table(
    "secret_blobs", metadata,
    Column("name", String(400), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

changes = Table(
    "changes", metadata,
    Column("name", String(NAME), primary_key=True),
    Column("version", BigInteger, nullable=False),
)
"""Monotonic counters: ``definitions`` moves with every tool/profile/agent/setting write, so
every process on the database knows when to reload its snapshot (SPEC §12)."""

rate_counters = Table(
    "rate_counters", metadata,
    Column("key", String(512), primary_key=True),
    Column("window_start", Float, nullable=False),
    Column("count", Integer, nullable=False),
)

turn_counts = Table(
    "turn_counts", metadata,
    Column("key", String(512), primary_key=True),
    Column("count", Integer, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
)
"""Calls per turn group and limit layer (``max_calls_per_turn``), shared by every process;
a row is forgotten once ``expires_at`` (epoch seconds) passes."""

concurrency_groups = Table(
    "concurrency_groups", metadata,
    Column("key", String(512), primary_key=True),
)
"""One row per tenant's concurrency group: the row an acquirer locks (PostgreSQL) while it
counts the group's live leases."""

concurrency_leases = Table(
    "concurrency_leases", metadata,
    Column("group_key", String(512), primary_key=True),
    Column("lease_id", String(ID), primary_key=True),
    Column("expires_at", Float, nullable=False),
)
"""A held concurrency slot. Released when its call ends; a holder that died leaves a row
that stops counting once ``expires_at`` (epoch seconds, bounded by the call timeout) passes."""

agent_calls_in_flight = Table(
    "agent_calls_in_flight", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("agent", String(NAME), nullable=False),
    Column("chain", JSON, nullable=False),
    Column("owner", String(NAME), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index("ix_agent_calls_in_flight_callee", "tenant_id", "agent"),
)
"""An ``agent_call`` running now, in any process on this store: the callee ``agent`` of
``tenant_id`` and the ``chain`` of agents it was reached through (the caller last), for the
chain guard (``toolkeeper.providers.agent_chains``). Deleted when the call ends; a process
that died leaves a row that stops counting once ``expires_at`` (epoch seconds: start + the
call's timeout + a margin) passes. ``owner``: the process that wrote it (host:pid:nonce)."""

console_sessions = Table(
    "console_sessions", metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("roles", String(NAME), nullable=False),
    Column("subject", String(NAME), nullable=False),
    Column("issuer", String(2000), nullable=False),
    Column("name", String(NAME), nullable=False),
    Column("email", String(NAME)),
    Column("csrf", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("idle_expires_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index("ix_console_sessions_expires", "expires_at"),
)
"""A person signed in to the console (single sign-on, ``toolkeeper.identity.sso``): only
the SHA-256 of the cookie's session id is kept. ``roles``: space-separated. Times: epoch
seconds; the session ends at ``idle_expires_at`` (moved on use) or ``expires_at``."""

sso_logins = Table(
    "sso_logins", metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("state", String(128), nullable=False),
    Column("nonce", String(128), nullable=False),
    Column("verifier", String(128), nullable=False),
    Column("expires_at", Float, nullable=False),
)
"""A sign-in started at the provider and not finished: bound to the browser's pre-login
cookie (its id's hash), taken once by the callback."""

request_states = Table(
    "request_states", metadata,
    Column("nonce", String(64), primary_key=True),
    Column("expires_at", Float, nullable=False),
    Index("ix_request_states_expires", "expires_at"),
)
"""An MCP ``requestState`` (``toolkeeper.mcp.request_state``) already answered: its nonce,
kept until the state's own expiry (epoch seconds) so it is accepted once, by any worker or
replica; deleted after it expired."""

credentials = Table(
    "credentials", metadata,
    Column("tenant_id", String(ID), primary_key=True),
    Column("connector", String(NAME), primary_key=True),
    Column("key", String(NAME), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
"""A tenant's credentials (REST ``/credentials``): one row per (tenant, connector, key), the
value sealed by the embedded secrets store with the tenant in its associated data. Names
are per tenant; the operator's platform secrets stay in ``secret_blobs``."""

retrieval_pipelines = Table(
    "retrieval_pipelines", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("name", String(NAME), nullable=False),
    Column("description", Text, nullable=False),
    Column("chunk_chars", Integer, nullable=False),
    Column("chunk_overlap", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("tenant_id", "name", name="uq_retrieval_pipelines_tenant_name"),
)
"""A tenant's retrieval pipeline (``rag_retrieval`` tools and the ``retrieval`` built-in
name it by id or name); its chunking settings apply to every document ingested."""

retrieval_documents = Table(
    "retrieval_documents", metadata,
    Column("id", String(ID), primary_key=True),
    Column("pipeline_id", String(ID), ForeignKey("retrieval_pipelines.id", ondelete="CASCADE"),
           nullable=False, index=True),
    Column("source", String(1000), nullable=False),
    Column("metadata", JSON, nullable=False),
    Column("content_hash", String(80), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

retrieval_chunks = Table(
    "retrieval_chunks", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline_id", String(ID), nullable=False, index=True),
    Column("document_id", String(ID), ForeignKey("retrieval_documents.id", ondelete="CASCADE"),
           nullable=False, index=True),
    Column("ordinal", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("metadata", JSON, nullable=False),
)
"""A document's chunks. The full-text index is the backend's own, created by migration 0006
beside this table: on SQLite the FTS5 table ``retrieval_fts`` (kept in step by triggers), on
PostgreSQL the generated ``tsv`` column with a GIN index."""

recent_calls = Table(
    "recent_calls", metadata,  # ids grow with every call ever logged: 64-bit (0014)
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("call_id", String(ID), nullable=False),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("agent", String(NAME)),
    Column("tool", String(NAME), nullable=False),
    Column("action", String(NAME)),
    Column("tool_version", String(64)),
    Column("status", String(32), nullable=False),
    Column("reason", String(NAME)),
    Column("duration_ms", Float, nullable=False),
    Column("trace_id", String(NAME)),
    Index("ix_recent_calls_tenant_id", "tenant_id", "id"),
)
"""The last ``recent_calls_max`` calls of each tenant, whatever became of them (denied,
gated, pure, recorded): what agents tried, for the console. No arguments or outputs; the
oldest rows are dropped as new ones are written (``toolkeeper.store.recent_calls``)."""

mcp_tasks = Table(
    "mcp_tasks", metadata,
    Column("id", String(ID), primary_key=True),
    Column("tenant_id", String(ID), nullable=False),
    Column("agent", String(NAME), nullable=False),
    Column("tool", String(NAME), nullable=False),
    Column("status", String(16), nullable=False),
    Column("phase", String(16), nullable=False),
    Column("status_message", Text),
    Column("approval_id", String(ID)),
    Column("request", JSON, nullable=False),
    Column("input_requests", JSON),
    Column("result", JSON),
    Column("error", JSON),
    Column("poll_ms", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("lease_until", Float),
    Index("ix_mcp_tasks_expires", "expires_at"),
)
"""A ``tools/call`` answered over MCP as a task (extension ``io.modelcontextprotocol/tasks``,
``toolkeeper.mcp.tasks``), bound to ``tenant_id`` + ``agent``. ``status``: the wire status
(working, input_required, completed, failed, cancelled); ``phase``: what it waits for
(running, approval, confirm, done). ``request``: the call to run again once decided (its
idempotency key kept); ``result``/``error``: the pipeline's already capped answer.
``lease_until``: a running call's claim (a run whose process died is taken over after it).
Times: epoch seconds; the row is gone (not found) after ``expires_at``."""
