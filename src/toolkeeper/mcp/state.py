"""The key sealing what toolkeeper's MCP server hands clients to bring back (session ids,
``requestState``), and the unpadded base64url those tokens are written in."""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

STATE_KEY_SETTING = "mcp:request_state_key"


def state_key(gw: Gateway) -> bytes:
    """Shared by every process over one store, so an answer can come back to any worker
    or replica; created once (``serve`` does it before starting workers)."""
    return bytes.fromhex(str(gw.store.registry.first_setting(STATE_KEY_SETTING,
                                                             os.urandom(32).hex())))


def b64url(raw: bytes) -> str:
    """``raw`` as unpadded base64url."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """The bytes of unpadded base64url ``text`` (``ValueError`` if it is not base64url)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
