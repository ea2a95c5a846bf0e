"""The tasks extension's wire (``io.modelcontextprotocol/tasks``, SEP-2663): negotiation,
the ``Task`` shapes toolkeeper answers and the params of ``tasks/get|update|cancel``
(:mod:`toolkeeper.mcp.tasks` holds the behaviour)."""

from __future__ import annotations

import base64
import binascii
import os
import re
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from toolkeeper.store.mcp_tasks import TaskRow

Ctx = ServerRequestContext[Any, Any]
TASKS = "io.modelcontextprotocol/tasks"
POLL_MS = {"approval": 5000, "confirm": 2000}
"""Suggested polling while a task waits for a human (a running call: its row's)."""
_B64 = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


class TaskParams(types.RequestParams):
    task_id: str
    request_state: str | None = None


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


def declared(ctx: Ctx) -> bool:
    """The client declared the extension: on this request (2026-07-28 ``_meta``)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = (ctx.meta or {}).get(types.CLIENT_CAPABILITIES_META_KEY)
    ext = caps.get("extensions") if isinstance(caps, dict) else getattr(caps, "extensions",
                                                                         None)
    return isinstance(ext, dict) and TASKS in ext


def advertise(caps: types.ServerCapabilities, version: str | None) -> types.ServerCapabilities:
    """``capabilities.extensions[TASKS]`` in ``server/discover`` (2026-07-28 only)."""
    if version not in MODERN_PROTOCOL_VERSIONS:
        return caps
    return caps.model_copy(update={"extensions": {**(caps.extensions or {}), TASKS: {}}})


def missing_capability() -> MCPError:
    return MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message=f"this needs the client capability extensions[{TASKS!r}]",
                    data={"requiredCapabilities": {"extensions": {TASKS: {}}}})


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def envelope(row: TaskRow) -> dict[str, Any]:
    """The ``Task`` fields (``ttlMs``, ``pollIntervalMs``: integer milliseconds)."""
    out: dict[str, Any] = {
        "taskId": row.id, "status": row.status, "createdAt": _iso(row.created_at),
        "lastUpdatedAt": _iso(row.updated_at),
        "ttlMs": int((row.expires_at - row.created_at) * 1000),
        "pollIntervalMs": POLL_MS.get(row.phase, row.poll_ms)}
    if row.status_message:
        out["statusMessage"] = row.status_message
    return out


def detailed(row: TaskRow) -> dict[str, Any]:
    """``tasks/get``: the task with its result, error or input requests inlined."""
    out = {"resultType": "complete", **envelope(row)}
    if row.status == "completed" and row.result is not None:
        out["result"] = row.result
    elif row.status == "failed":
        out["error"] = row.error or {"code": types.INTERNAL_ERROR, "message": "failed"}
    elif row.status == "input_required":
        out["inputRequests"] = row.input_requests or {}
    return out


def header_name(ctx: Ctx) -> str | None:
    request = ctx.request
    raw = request.headers.get("mcp-name") if request is not None else None
    if raw is None:
        return None
    value = str(raw).strip()
    if (m := _B64.match(value)) is not None:
        try:
            return base64.b64decode(m["payload"], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return "\0"  # never equal to a task id
    return value


class ArgumentSeal:
    """A task's call arguments sealed at rest (AES-256-GCM under a key derived from the
    store's MCP state key, bound to the task, its tenant and agent): the tasks table alone
    shows no argument (the approval keeps the redacted copy), and a sealed value moved onto
    another row does not open."""

    def __init__(self, state_key: bytes) -> None:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                   info=b"toolkeeper mcp task arguments").derive(state_key)
        self._aead = AESGCM(key)

    @staticmethod
    def _aad(row_id: str, tenant_id: str, agent: str) -> bytes:
        return orjson.dumps(["mcp-task", row_id, tenant_id, agent])

    def seal(self, arguments: Any, row_id: str, tenant_id: str, agent: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, orjson.dumps(arguments),
                                    self._aad(row_id, tenant_id, agent))
        return base64.b64encode(nonce + sealed).decode()

    def open(self, sealed: str, row_id: str, tenant_id: str, agent: str) -> Any:
        raw = base64.b64decode(sealed)
        return orjson.loads(self._aead.decrypt(raw[:12], raw[12:],
                                               self._aad(row_id, tenant_id, agent)))
