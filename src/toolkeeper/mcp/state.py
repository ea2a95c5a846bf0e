"""The key sealing MCP ``requestState`` (in-band confirmations of 2026-07-28 clients)."""

from __future__ import annotations

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
