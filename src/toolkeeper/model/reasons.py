"""Stable reason codes: every stopped or failed call ends with exactly one of these.

Defined once here and used by every face (library, REST, MCP, CLI, audit, metrics).
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    # authenticate
    UNAUTHENTICATED = "unauthenticated"
    """No token, or one unknown, revoked or expired (or an agent that no longer exists)."""
    FORBIDDEN = "forbidden"
    """The caller is known but its role may not do this."""
    # identity: OAuth access tokens (toolkeeper.identity)
    # console sign-in: sessions and CSRF (toolkeeper.identity.sso)
    CSRF_FAILED = "csrf_failed"
    """A console request without the session's CSRF token or from another origin."""
    SESSION_EXPIRED = "session_expired"
    """The console session timed out: sign in again."""
    SSO_FAILED = "sso_failed"
    """The console's single sign-on could not complete (the provider's answer refused)."""
    # resolve
    TOOL_NOT_FOUND = "tool_not_found"
    """No tool of that name is visible to the caller."""
    TOOL_DISABLED = "tool_disabled"
    """The tool exists but is disabled."""
    TOOL_NOT_PUBLISHED = "tool_not_published"
    """The tool has no published version to run (production mode runs published
    tools only; a draft runs in debug mode)."""
    TOOL_QUARANTINED = "tool_quarantined"
    """The tool's upstream definition changed since it was published: it waits for an
    operator's review and does not run."""
    TOOL_NOT_ENABLED = "tool_not_enabled"
    """The agent's profile has no activation for the tool (or the agent no profile)."""
    ACTION_NOT_FOUND = "action_not_found"
    """The tool has no such action, or has several and none was named."""
    ACTION_NOT_ALLOWED = "action_not_allowed"
    """The action is not among those the activation or the policy allows."""
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    """The tool's provider cannot be built here (entry point or function gone, implementation
    config invalid, upstream MCP server not configured): refused at publish, stops a call."""
    # validate
    INVALID_ARGUMENTS = "invalid_arguments"
    """The arguments (or the request) do not match the schema; ``details`` points at
    the offending values."""
    JSON_TOO_DEEP = "json_too_deep"
    """A REST body nests deeper than ``toolkeeper.api.limits.MAX_JSON_DEPTH`` (400)."""
    PAYLOAD_TOO_LARGE = "payload_too_large"
    """The request body, the arguments or a tool's input exceeds its size limit."""
    HEADER_TOO_LARGE = "header_too_large"
    """The request line and headers exceed ``toolkeeper serve``'s ``max_header_bytes``
    (HTTP 431; the connection is closed)."""
    # scope
    SCOPE_MISSING = "scope_missing"
    """The agent lacks a scope the tool or action requires."""
    # limits
    TOOL_UNAVAILABLE = "tool_unavailable"
    """The tool is failing (its health breaker is open, or a program it needs cannot
    start): retry after ``retry_after``."""
    RATE_LIMITED = "rate_limited"
    """A rate limit of the tenant, profile or activation was hit: retry after
    ``retry_after``."""
    CALL_LIMIT_EXCEEDED = "call_limit_exceeded"
    """The turn group already made ``max_calls_per_turn`` calls."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """The call would cross a cost or call budget of the tenant, profile or activation;
    ``details.resets_at`` (and ``retry_after``) say when the budget's period starts again."""
    CONCURRENCY_LIMITED = "concurrency_limited"
    """The tool's concurrency group stayed full for the tool's timeout."""
    # gate
    GATE_DENIED = "gate_denied"
    """The gate for this risk at the agent's autonomy is ``deny``."""
    APPROVAL_REQUIRED = "approval_required"
    """The gate is ``approve``: a person must approve this exact call; re-submit with
    its ``approval_id`` (or the same turn group) once approved."""
    CONFIRMATION_REQUIRED = "confirmation_required"
    """The gate is ``confirm``: once the requesting agent's user (or an approver) confirms,
    re-submit with the ``approval_id``."""
    PREVIEW_REQUIRED = "preview_required"
    """The gate is ``preview``: the result holds the preview and a ``preview_token``;
    send the token back with the same call to run it."""
    APPROVAL_MISMATCH = "approval_mismatch"
    """The approval given was for another call (arguments, tool version, agent) or
    another kind of gate."""
    APPROVAL_PENDING = "approval_pending"
    """The approval is still waiting for a person."""
    APPROVAL_DENIED = "approval_denied"
    """A person denied the call."""
    APPROVAL_EXPIRED = "approval_expired"
    """The approval expired before it was used (``approval_ttl_s``)."""
    APPROVAL_CONSUMED = "approval_consumed"
    """The approval was already used: each approval runs one call once."""
    APPROVAL_NOT_FOUND = "approval_not_found"
    """No such approval for this caller."""
    APPROVER_NOT_ALLOWED = "approver_not_allowed"
    """The token may not decide this approval: an ``approve`` gate needs an approver other
    than the agent that asked, a ``confirm`` the requesting agent's user or an approver."""
    APPROVALS_PENDING_LIMIT = "approvals_pending_limit"
    """The agent already has ``max_pending_approvals`` approvals waiting for a human: a call
    that would ask for one more is stopped (REST 429) until some are decided or expire."""
    PREVIEW_INVALID = "preview_invalid"
    """The preview token is unknown, expired, used, or for another call."""
    # supersede
    SUPERSEDED = "superseded"
    """The turn group was superseded (the answer regenerated): its later irreversible
    calls do not run."""
    # idempotency
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    """The idempotency key was used before with other arguments."""
    IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress"
    """A call with the same idempotency key is still running."""
    OUTCOME_UNKNOWN = "outcome_unknown"
    """A call with this key may have run, and its outcome is unknown: it never runs
    again until an operator records the real outcome (``POST /calls/{call_id}/resolve``)."""
    # execute / outcome
    TOOL_ERROR = "tool_error"
    """The tool raised or reported an error."""
    UPSTREAM_ERROR = "upstream_error"
    """The upstream (an MCP server, an agent over A2A) failed or answered an error."""
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
    """The tool outlived its timeout (``unknown`` when it may have executed)."""
    OUTPUT_TOO_LARGE = "output_too_large"
    """The tool's output exceeds its limit (``max_output_chars`` or the tool's own)."""
    INVALID_OUTPUT = "invalid_output"
    """The tool's output does not match its output schema, or is not a result at all."""
    SECRET_NOT_FOUND = "secret_not_found"
    """A ``${secret:connector/key}`` reference has no value (or one that cannot be
    decrypted)."""
    INTERNAL_ERROR = "internal_error"
    """A bug in toolkeeper: the call's outcome is recorded as far as it is known."""
    UNAVAILABLE = "unavailable"
    """The REST client (``toolkeeper.client``) got no answer from the server within its
    bounded wait: the server is down, unreachable or kept answering 503."""
    STORE_UNAVAILABLE = "store_unavailable"
    """The database did not answer or could not write (down, restarting, unreachable, pool
    exhausted, SQLite file read-only or full): nothing was committed by this request; REST
    answers 503 with ``Retry-After``. A call that may have executed before the store failed
    is resolved by recovery (``unknown``), as after a crash."""
    CONFIG_INVALID = "config_invalid"
    """A config, definition or policy does not compile (``details.problems`` lists why)."""
    POLICY_EXCEEDS_BOUNDS = "policy_exceeds_bounds"
    """A tenant-written host path, network or command beyond the operator's ceiling."""
    # management
    PUBLISH_VIA_ENDPOINT = "publish_via_endpoint"
    """Publishing and status changes go through the publish endpoint, not an edit."""
    INVALID_VERSION = "invalid_version"
    """The version is not semver ``X.Y.Z``, not above the last published one, or already
    published with other content."""
    NOT_FOUND = "not_found"
    """No such object (tool, agent, profile, token, call …) in the caller's tenant."""
    CONFLICT = "conflict"
    """The object exists already, or the change conflicts with another."""
    INVALID_STATE = "invalid_state"
    """The object is not in a state that allows this (an approval no longer pending,
    a published tool edited in place)."""
    NOT_QUARANTINED = "not_quarantined"
    """A quarantine was asked of a tool that is not quarantined (nothing to review)."""
    COMPENSATION_NOT_DEFINED = "compensation_not_defined"
    """The tool declares no compensation for this action."""
    ALREADY_COMPENSATED = "already_compensated"
    """The side effect was already compensated."""
    BATCH_ABORTED = "batch_aborted"
    """Not run: an earlier critical call of the batch failed."""
    # Python code comes only from the operator (tools written through the API)
    SECRET_LITERAL_REFUSED = "secret_literal_refused"
    """A definition holds a literal credential where a ``${secret:…}`` reference
    belongs."""
    ENTRY_POINT_NOT_ALLOWED = "entry_point_not_allowed"
    """A tool written through the API names Python code (entry points come from
    the operator's config only)."""
    FUNCTION_NOT_ALLOWED = "function_not_allowed"
    """The function is not in the operator's ``functions`` allow-list or the
    policy's ``allowed_functions``."""
    # SSRF guard (http providers and built-ins)
    ADDRESS_NOT_ALLOWED = "address_not_allowed"
    """The URL is refused (a scheme other than http(s), credentials in it, no host) or its
    host resolves to a private, loopback or other refused address outside
    ``allowed_networks``."""
    HOST_NOT_ALLOWED = "host_not_allowed"
    """The destination host is not in the policy's ``allowed_hosts`` (or is denied)."""
    # seed git tool and other built-in policy denials
    INVALID_REF = "invalid_ref"
    """``git``: a ref or branch name that is malformed or does not exist."""
    INVALID_SINCE_FORMAT = "invalid_since_format"
    """``git log``: ``since`` is not ``YYYY-MM-DD`` or ``N.hours|days|weeks``."""
    BRANCH_PREFIX_REQUIRED = "branch_prefix_required"
    """``git``: a new or written branch must start with
    ``managed_branch_prefix``."""
    TOO_MANY_FILES = "too_many_files"
    """``git``: more paths or changed files than the policy's ``max_files``."""
    DIRTY_WORKTREE = "dirty_worktree"
    """``git``: the worktree has uncommitted changes and the policy requires it clean."""
    PUSH_NOT_ALLOWED = "push_not_allowed"
    """``git``: the policy does not allow push, or not to that remote."""
    METHOD_NOT_ALLOWED = "method_not_allowed"
    """The HTTP method is not allowed (by ``http_request``'s policy, or on the
    endpoint)."""
    PATH_NOT_ALLOWED = "path_not_allowed"
    """The path or URI is outside what the policy lets the tool reach."""
    EXPRESSION_INVALID = "expression_invalid"
    """``calculate``/``json_transform``: the expression does not parse or is not
    allowed."""
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
    """``filesystem``: the path is empty, too long, has a NUL byte or names the root."""
    PATH_NOT_FOUND = "path_not_found"
    """``filesystem``: the path does not exist."""
    FILE_TOO_LARGE = "file_too_large"
    """``filesystem``: the file or content exceeds ``max_read_bytes``/``max_write_bytes``."""
    WRITE_NOT_ALLOWED = "write_not_allowed"
    """``filesystem``: the policy does not allow writing (``allow_write``)."""
    DELETE_NOT_ALLOWED = "delete_not_allowed"
    """``filesystem``: the policy does not allow delete (``allow_delete``)."""
    NOT_A_FILE = "not_a_file"
    """``filesystem``: the path is a directory or another kind of file."""
    NOT_A_DIRECTORY = "not_a_directory"
    """``filesystem``: a component of the path is not a directory."""
    ALREADY_EXISTS = "already_exists"
    """The target exists already (a file to create; another tool of that name, without
    ``replace=True``)."""
    DIRECTORY_NOT_EMPTY = "directory_not_empty"
    """``filesystem``: the directory to delete is not empty."""
    FILE_CHANGED = "file_changed"
    """A compensation found the file changed since the call it would undo."""
    # artifact provider (operator-installed code artifacts run in a worker process)
    ARTIFACT_NOT_INSTALLED = "artifact_not_installed"
    """The artifact (or that version) is not installed in the artifacts directory."""
    ARTIFACT_INPUT_MISSING = "artifact_input_missing"
    """The artifact's declared input is missing from the arguments."""
    ARTIFACT_TIMEOUT = "artifact_timeout"
    """Past the tool's deadline or the artifact's CPU limit: its process group is killed."""
    ARTIFACT_MEMORY_LIMIT = "artifact_memory_limit"
    """The artifact's process ran out of its memory limit and was killed."""
    ARTIFACT_FAILED = "artifact_failed"
    """The artifact raised, crashed or answered something that is not JSON."""
    # agent_call built-in and provider
    AGENT_NOT_FOUND = "agent_not_found"
    """No published endpoint of that agent in the caller's tenant (unknown, another
    tenant's, unpublished or disabled: one answer, revealing nothing)."""
    AGENT_NOT_ALLOWED = "agent_not_allowed"
    """``agent_call``: the agent is not in the policy's ``allowed_agents``."""
    AGENT_CALL_CYCLE = "agent_call_cycle"
    """``agent_call``: the agent is already on the call chain (a cycle)."""
    AGENT_CALL_DEPTH = "agent_call_depth"
    """``agent_call``: the chain of agent calls would exceed ``max_depth``."""
    # retrieval (the ``retrieval`` built-in, ``rag_retrieval`` tools, /retrieval REST)
    RETRIEVAL_QUERY_INVALID = "retrieval_query_invalid"
    """The query is empty, too long or has no words to search for."""
    RETRIEVAL_FILTER_INVALID = "retrieval_filter_invalid"
    """The metadata filters are not a small map of scalar values."""
    RETRIEVAL_TOP_K_EXCEEDED = "retrieval_top_k_exceeded"
    """``top_k`` is above the cap of the policy or the settings."""
    RETRIEVAL_INGEST_TOO_LARGE = "retrieval_ingest_too_large"
    """Too many documents, or a document too long, for one ingest."""
    RETRIEVAL_DOCUMENT_INVALID = "retrieval_document_invalid"
    """A document without text, or with an invalid source or metadata."""
    RETRIEVAL_PIPELINE_REQUIRED = "retrieval_pipeline_required"
    """``retrieval``: no pipeline named by the call or the policy."""
    RETRIEVAL_PIPELINE_NOT_ALLOWED = "retrieval_pipeline_not_allowed"
    """``retrieval``: the pipeline asked for is not the policy's ``pipeline_id`` or not in
    ``allowed_pipelines``."""
