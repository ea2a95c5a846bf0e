"""toolkeeper's own ``requestState`` (multi-round-trip requests of MCP 2026-07-28, SEP-2322).

The client echoes a ``requestState`` back with its answers, so it is attacker-controlled.
toolkeeper's states are envelopes ``tk1.<payload>.<tag>``: the payload (base64url JSON) is
integrity-protected by HMAC-SHA256 under a key derived from the store's shared
``mcp:request_state_key`` (:mod:`toolkeeper.mcp.state`: every worker and replica verifies
what any other minted) and binds

- ``v`` the format version, ``k`` the kind (``confirm``: a ``confirm`` gate's question;
  ``upstream``: an upstream server's questions), ``x`` what the kind carries (the approval
  id, or the upstream's own state);
- ``p`` the principal: a hash of tenant, agent, token id, issuer and subject;
- ``d`` the call: :func:`toolkeeper.canonical.digest` of tool, action and arguments;
- ``e`` the expiry (epoch seconds; never later than the approval's own) and ``n`` a random
  nonce, recorded when the state is accepted (``store.request_states``): it is good once.

Anything else — tampered, another version, another agent's or tenant's, for other
arguments, expired, replayed — is refused with ``-32602`` and ``data.reason`` =
``request_state_invalid`` (``data.detail`` says which check failed).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import orjson
from mcp.shared.exceptions import MCPError

from toolkeeper.canonical import digest
from toolkeeper.mcp.state import b64url, state_key, unb64url
from toolkeeper.model.reasons import Reason

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway
    from toolkeeper.model.call import Principal

VERSION = 1
PREFIX = "tk1."
DEFAULT_TTL_S = 600.0
"""The longest a state lives (a confirmation's is cut to its approval's expiry)."""
MAX_STATE_CHARS = 64 * 1024
"""A longer ``requestState`` is refused unread (an upstream's own is cut at half that)."""
MAX_UPSTREAM_STATE_CHARS = 32 * 1024
KINDS = ("confirm", "upstream")
_LABEL = b"toolkeeper/mcp/request-state/v1"


class StateRefused(Exception):
    """The state is not good for this caller and this call; ``detail`` is one of
    ``malformed``, ``tampered``, ``version``, ``principal``, ``call``, ``expired``,
    ``replayed``."""

    def __init__(self, detail: str, message: str) -> None:
        super().__init__(message)
        self.detail = detail

    def wire(self) -> MCPError:
        return MCPError(code=types.INVALID_PARAMS, message=f"Invalid requestState: {self}",
                        data={"reason": str(Reason.REQUEST_STATE_INVALID),
                              "detail": self.detail})


@dataclass(frozen=True, slots=True)
class Opened:
    kind: str
    carried: str
    """The approval id (``confirm``) or the upstream's own state (``upstream``; may be
    empty: the upstream sent none)."""
    expires_at: float
    nonce: str


def call_digest(tool: str, action: str, arguments: Any) -> str:
    """The exact call a state is good for."""
    return digest({"tool": tool, "action": action, "arguments": arguments})


def principal_digest(who: Principal) -> str:
    return digest([who.tenant_id, who.agent, who.token_id, who.issuer, who.subject])


def _unb64(text: str) -> bytes:
    """:func:`unb64url`, refusing any text but the one encoding of its bytes."""
    raw = unb64url(text)
    if b64url(raw) != text:
        raise ValueError("non-canonical base64url")
    return raw


class RequestStates:
    """Mints and takes back the states of one gateway."""

    def __init__(self, gw: Gateway, *, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.gw = gw
        self.ttl_s = ttl_s
        self._key: bytes | None = None

    def _mac(self, payload: bytes) -> bytes:
        if self._key is None:  # read once from the store (created there if absent)
            self._key = hmac.new(state_key(self.gw), _LABEL, hashlib.sha256).digest()
        return hmac.new(self._key, PREFIX.encode() + payload, hashlib.sha256).digest()

    def _authentic(self, payload: bytes, mac: bytes) -> bool:
        return hmac.compare_digest(mac, self._mac(payload))

    @staticmethod
    def _live(expires_at: float, now: float) -> bool:
        return now < expires_at

    def seal(self, who: Principal, call: str, kind: str, carried: str, *,
             expires_at: float | None = None) -> str:
        """A state for ``who`` and the call digest ``call``, good until ``expires_at``
        (at most :attr:`ttl_s` from now)."""
        assert kind in KINDS
        limit = time.time() + self.ttl_s
        claims = {"v": VERSION, "k": kind, "p": principal_digest(who), "d": call,
                  "e": round(min(limit, expires_at if expires_at is not None else limit), 3),
                  "n": os.urandom(16).hex(), "x": carried}
        payload = orjson.dumps(claims)
        return PREFIX + b64url(payload) + "." + b64url(self._mac(payload))

    def open(self, state: Any, who: Principal, call: str, *,
             now: float | None = None) -> Opened:
        """Verify ``state`` for ``who`` and ``call`` (not yet marked used)."""
        if not isinstance(state, str) or len(state) > MAX_STATE_CHARS \
                or not state.startswith(PREFIX) or state.count(".") != 2:
            raise StateRefused("malformed", "not a requestState this gateway issued")
        body, _, tag = state[len(PREFIX):].partition(".")
        try:
            payload, mac = _unb64(body), _unb64(tag)
        except (ValueError, TypeError):
            raise StateRefused("malformed", "not a requestState this gateway issued") from None
        if not self._authentic(payload, mac):
            raise StateRefused("tampered", "integrity check failed")
        claims = orjson.loads(payload)
        if claims.get("v") != VERSION or claims.get("k") not in KINDS:
            raise StateRefused("version", "an unknown requestState version")
        if not hmac.compare_digest(str(claims.get("p")), principal_digest(who)):
            raise StateRefused("principal", "issued to another caller")
        if not hmac.compare_digest(str(claims.get("d")), call):
            raise StateRefused("call", "issued for another tool call or other arguments")
        expires_at = float(claims["e"])
        if not self._live(expires_at, time.time() if now is None else now):
            raise StateRefused("expired", "expired; call the tool again without it")
        return Opened(kind=str(claims["k"]), carried=str(claims.get("x", "")),
                      expires_at=expires_at, nonce=str(claims["n"]))

    async def take(self, state: Any, who: Principal, call: str) -> Opened:
        """:meth:`open`, then mark it used (any worker or replica refuses it again)."""
        opened = self.open(state, who, call)
        fresh = await anyio.to_thread.run_sync(
            self.gw.store.request_states.consume, opened.nonce, opened.expires_at, time.time())
        if not fresh:
            raise StateRefused("replayed", "already used; call the tool again without it")
        return opened


__all__ = ["Opened", "RequestStates", "StateRefused", "call_digest"]
