"""The audit records one request wrote, normalised so that two paths answering the same
request can be compared (the lean-path differentials, REST and MCP): what is minted per
call or per write — sequence, event and call ids, times, durations, chain hashes, approval
and preview ids — is replaced by a placeholder; everything else (event types, tenant,
agent, tool, action, risk, gate, reason, the event data, the arguments' digest) is kept."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from toolkeeper import Gateway
from toolkeeper.canonical import digest

Mark = dict[str | None, int]
"""The newest audit sequence number of each tenant's chain."""

_DROPPED = ("seq", "event_id", "ts", "prev_hash", "hash", "duration_ms")
_MINTED_FIELDS = ("call_id", "trace_id")
_MINTED_DATA = {"call_id", "approval_id", "preview_token", "duration_ms", "expires_at",
                "created_at", "trace_id", "side_effect_id", "elapsed_ms"}
_MINTED_TEXT = re.compile(r"\b(ap|pv)_[0-9A-Za-z_-]{6,}")


def mark(gw: Gateway) -> Mark:
    """Where every tenant's chain ends now (queued events written first)."""
    gw.flush()
    out: Mark = {}
    for tenant in gw.store.audit.tenants():
        newest = gw.store.audit.list(tenant, limit=1, newest_first=True)
        out[tenant] = newest[0].seq if newest else 0
    return out


def _normal(value: Any, sides: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: "<minted>" if (
            (k in _MINTED_DATA or k.endswith("call_id")) and v is not None) or (
            k == "idempotency_key" and str(v).startswith("call:")) else _normal(v, sides)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v, sides) for v in value]
    if isinstance(value, str):
        for side in sides:
            value = value.replace(side, "$path")
        return _MINTED_TEXT.sub("<minted>", value)
    return value


def written_since(gw: Gateway, since: Mark, *, sides: tuple[str, ...] = (),
                  arguments: Any = None) -> list[Any]:
    """The events written after ``since``, in order per tenant, normalised; ``sides``: the
    names a ``$path`` in the request became (written back as ``$path``); ``arguments``: the
    call's arguments as sent, whose digest is written as ``<digest of the arguments sent>``
    (a path that hashed other arguments keeps its own digest, and differs)."""
    gw.flush()
    sent = _digest_of(arguments)
    out: list[Any] = []
    for tenant in sorted(gw.store.audit.tenants(), key=str):
        for ev in gw.store.audit.list(tenant, after_seq=since.get(tenant, 0), limit=1000):
            row = {f.name: getattr(ev, f.name) for f in dataclasses.fields(ev)
                   if f.name not in _DROPPED}
            for k in _MINTED_FIELDS:
                if row.get(k) is not None:
                    row[k] = "<minted>"
            if sent is not None and row["data"].get("args_digest") == sent:
                row["data"] = {**row["data"], "args_digest": "<digest of the arguments sent>"}
            out.append(_normal(row, sides))
    return out



def _digest_of(arguments: Any) -> str | None:
    try:
        return None if arguments is None else digest(arguments)
    except ValueError:
        return None
