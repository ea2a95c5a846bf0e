"""Stable reason codes: every stopped or failed call ends with exactly one of these.

Defined once here and used by every face (library, REST, MCP, CLI, audit, metrics).
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    # authenticate
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    # identity: OAuth access tokens (toolkeeper.identity)
    # console sign-in: sessions and CSRF (toolkeeper.identity.sso)
    CSRF_FAILED = "csrf_failed"
    SESSION_EXPIRED = "session_expired"
    SSO_FAILED = "sso_failed"
    # resolve
    TOOL_NOT_FOUND = "tool_not_found"
    TOOL_DISABLED = "tool_disabled"
    TOOL_NOT_PUBLISHED = "tool_not_published"
    TOOL_QUARANTINED = "tool_quarantined"
    TOOL_NOT_ENABLED = "tool_not_enabled"
    ACTION_NOT_FOUND = "action_not_found"
    ACTION_NOT_ALLOWED = "action_not_allowed"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    """The tool's provider cannot be built here (entry point or function gone, implementation
    config invalid, upstream MCP server not configured): refused at publish, stops a call."""
    # validate
    INVALID_ARGUMENTS = "invalid_arguments"
    JSON_TOO_DEEP = "json_too_deep"
    """A REST body nests deeper than ``toolkeeper.api.limits.MAX_JSON_DEPTH`` (400)."""
    PAYLOAD_TOO_LARGE = "payload_too_large"
    HEADER_TOO_LARGE = "header_too_large"
    """The request line and headers exceed ``toolkeeper serve``'s ``max_header_bytes``
    (HTTP 431; the connection is closed)."""
    # scope
    SCOPE_MISSING = "scope_missing"
    # limits
    TOOL_UNAVAILABLE = "tool_unavailable"
    RATE_LIMITED = "rate_limited"
    CALL_LIMIT_EXCEEDED = "call_limit_exceeded"
    CONCURRENCY_LIMITED = "concurrency_limited"
    # gate
    GATE_DENIED = "gate_denied"
    APPROVAL_REQUIRED = "approval_required"
    CONFIRMATION_REQUIRED = "confirmation_required"
    PREVIEW_REQUIRED = "preview_required"
    APPROVAL_MISMATCH = "approval_mismatch"
    APPROVAL_PENDING = "approval_pending"
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_CONSUMED = "approval_consumed"
    APPROVAL_NOT_FOUND = "approval_not_found"
    APPROVER_NOT_ALLOWED = "approver_not_allowed"
    APPROVALS_PENDING_LIMIT = "approvals_pending_limit"
    """The agent already has ``max_pending_approvals`` approvals waiting for a human: a call
    that would ask for one more is stopped (REST 429) until some are decided or expire."""
    PREVIEW_INVALID = "preview_invalid"
    # supersede
    SUPERSEDED = "superseded"
    # idempotency
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress"
    OUTCOME_UNKNOWN = "outcome_unknown"
    # execute / outcome
    TOOL_ERROR = "tool_error"
    UPSTREAM_ERROR = "upstream_error"
    INPUT_REQUIRED = "input_required"
    """An upstream MCP tool asked the agent for input (elicitation, sampling, roots) that
    could not be asked in-band: nothing ran upstream; the MCP face answers the agent with an
    ``InputRequiredResult`` and the agent's retry is a new governed call. The round's
    outcome does not hold its idempotency key."""
    REQUEST_STATE_INVALID = "request_state_invalid"
    """An MCP ``requestState`` toolkeeper did not mint for this caller and this exact call,
    or one already used or expired (``toolkeeper.mcp.request_state``): refused, nothing
    ran."""
    # upstream OAuth (toolkeeper.identity.upstream)
    UPSTREAM_UNAUTHORIZED = "upstream_unauthorized"
    """An upstream requiring OAuth refused the gateway's token twice (one renewal between),
    or its authorization server refused to issue one (grant revoked, client disabled, bad
    secret, subject token refused): nothing ran upstream."""
    UPSTREAM_TOKEN_UNAVAILABLE = "upstream_token_unavailable"
    """The authorization server of an OAuth upstream did not answer in time, could not be
    reached or answered garbage: no token, so nothing was sent upstream (retryable)."""
    TIMEOUT = "timeout"
    OUTPUT_TOO_LARGE = "output_too_large"
    INVALID_OUTPUT = "invalid_output"
    SECRET_NOT_FOUND = "secret_not_found"
    INTERNAL_ERROR = "internal_error"
    UNAVAILABLE = "unavailable"
    """The REST client (``toolkeeper.client``) got no answer from the server within its
    bounded wait: the server is down, unreachable or kept answering 503."""
    STORE_UNAVAILABLE = "store_unavailable"
    """The database did not answer or could not write (down, restarting, unreachable, pool
    exhausted, SQLite file read-only or full): nothing was committed by this request; REST
    answers 503 with ``Retry-After``. A call that may have executed before the store failed
    is resolved by recovery (``unknown``), as after a crash."""
    CONFIG_INVALID = "config_invalid"
    POLICY_EXCEEDS_BOUNDS = "policy_exceeds_bounds"
    """A tenant-written host path, network or command beyond the operator's ceiling."""
    # management
    PUBLISH_VIA_ENDPOINT = "publish_via_endpoint"
    INVALID_VERSION = "invalid_version"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    INVALID_STATE = "invalid_state"
    NOT_QUARANTINED = "not_quarantined"
    """A quarantine was asked of a tool that is not quarantined (nothing to review)."""
    COMPENSATION_NOT_DEFINED = "compensation_not_defined"
    ALREADY_COMPENSATED = "already_compensated"
    BATCH_ABORTED = "batch_aborted"
    # Python code comes only from the operator (tools written through the API)
    SECRET_LITERAL_REFUSED = "secret_literal_refused"
    ENTRY_POINT_NOT_ALLOWED = "entry_point_not_allowed"
    FUNCTION_NOT_ALLOWED = "function_not_allowed"
    # SSRF guard (http providers and built-ins)
    ADDRESS_NOT_ALLOWED = "address_not_allowed"
    HOST_NOT_ALLOWED = "host_not_allowed"
    # seed git tool and other built-in policy denials
    INVALID_REF = "invalid_ref"
    INVALID_SINCE_FORMAT = "invalid_since_format"
    BRANCH_PREFIX_REQUIRED = "branch_prefix_required"
    TOO_MANY_FILES = "too_many_files"
    DIRTY_WORKTREE = "dirty_worktree"
    PUSH_NOT_ALLOWED = "push_not_allowed"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    PATH_NOT_ALLOWED = "path_not_allowed"
    EXPRESSION_INVALID = "expression_invalid"
    # web_fetch built-in
    UNSUPPORTED_CONTENT_TYPE = "unsupported_content_type"
    """The fetched page is neither HTML, plain text nor JSON."""
    # web_search built-in: where its provider key comes from, and the provider's verdict on it
    CREDENTIAL_MISSING = "credential_missing"
    """No key at any of the four places ``web_search`` looks (the message names them)."""
    CREDENTIAL_INVALID = "credential_invalid"
    """A credential holds a JSON object without ``api_key``/``token``, or a bad endpoint."""
    CREDENTIAL_REJECTED = "credential_rejected"
    """The search provider refused the key (HTTP 401/403)."""
    # shell built-in
    COMMAND_NOT_ALLOWED = "command_not_allowed"
    """The command is not in the shell policy's ``commands``."""
    ARGUMENT_NOT_ALLOWED = "argument_not_allowed"
    """A shell argument matches none of its command's patterns (or too many arguments)."""
    INTERPRETER_NOT_ALLOWED = "interpreter_not_allowed"
    """A shell, interpreter or program-running wrapper: never run, whatever the policy says."""
    COMMAND_TIMEOUT = "command_timeout"
    """The command outlived the shell policy's ``timeout_s``; its whole process group was
    killed."""
    # processes tools start (toolkeeper.sandbox)
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    """No OS sandbox can be had here (no bubblewrap, no user namespaces, another OS) and the
    operator did not opt out (``TOOLKEEPER_UNSAFE_NO_SANDBOX=1``): the process was not
    started."""
    # Vault secrets backend (secrets/vault.py)
    SECRETS_UNAVAILABLE = "secrets_unavailable"
    """The secrets backend (Vault) could not be reached, timed out or refused the gateway:
    the secret was not resolved, so nothing that needed it was sent. Retryable when Vault
    was unreachable or slow, not when it refused the gateway's token."""
    # filesystem built-in
    PATH_OUTSIDE_ROOT = "path_outside_root"
    """Absolute, ``..``, a symbolic link on the way, or the gateway's undo directory."""
    INVALID_PATH = "invalid_path"
    PATH_NOT_FOUND = "path_not_found"
    FILE_TOO_LARGE = "file_too_large"
    WRITE_NOT_ALLOWED = "write_not_allowed"
    DELETE_NOT_ALLOWED = "delete_not_allowed"
    NOT_A_FILE = "not_a_file"
    NOT_A_DIRECTORY = "not_a_directory"
    ALREADY_EXISTS = "already_exists"
    DIRECTORY_NOT_EMPTY = "directory_not_empty"
    FILE_CHANGED = "file_changed"
    """A compensation found the file changed since the call it would undo."""
    # artifact provider (operator-installed code artifacts run in a worker process)
    ARTIFACT_NOT_INSTALLED = "artifact_not_installed"
    ARTIFACT_INPUT_MISSING = "artifact_input_missing"
    ARTIFACT_TIMEOUT = "artifact_timeout"
    """Past the tool's deadline or the artifact's CPU limit: its process group is killed."""
    ARTIFACT_MEMORY_LIMIT = "artifact_memory_limit"
    ARTIFACT_FAILED = "artifact_failed"
    """The artifact raised, crashed or answered something that is not JSON."""
    # agent_call built-in and provider
    AGENT_NOT_FOUND = "agent_not_found"
    """No published endpoint of that agent in the caller's tenant (unknown, another
    tenant's, unpublished or disabled: one answer, revealing nothing)."""
    AGENT_NOT_ALLOWED = "agent_not_allowed"
    AGENT_CALL_CYCLE = "agent_call_cycle"
    AGENT_CALL_DEPTH = "agent_call_depth"
    # retrieval (the ``retrieval`` built-in, ``rag_retrieval`` tools, /retrieval REST)
    RETRIEVAL_QUERY_INVALID = "retrieval_query_invalid"
    RETRIEVAL_FILTER_INVALID = "retrieval_filter_invalid"
    RETRIEVAL_TOP_K_EXCEEDED = "retrieval_top_k_exceeded"
    RETRIEVAL_INGEST_TOO_LARGE = "retrieval_ingest_too_large"
    RETRIEVAL_DOCUMENT_INVALID = "retrieval_document_invalid"
    RETRIEVAL_PIPELINE_REQUIRED = "retrieval_pipeline_required"
    RETRIEVAL_PIPELINE_NOT_ALLOWED = "retrieval_pipeline_not_allowed"
