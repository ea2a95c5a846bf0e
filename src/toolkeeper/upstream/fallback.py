"""The upstream servers the lean client could not handshake with (SPEC §10), served by the
SDK's client instead: several times slower per call, so never silent. Each is logged once
(a warning with its reason) and counted once per process in
``toolkeeper_upstream_sdk_fallbacks_total{server,reason}``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("toolkeeper.upstream")


class Fallbacks:
    """Server name → why it uses the SDK's client (for this pool's life)."""

    def __init__(self, counted: Callable[[str, str], None] | None = None) -> None:
        self._counted = counted
        self.reasons: dict[str, str] = {}
        """Server name → the reason code (``HandshakeRefused.code``)."""

    def __contains__(self, server: object) -> bool:
        return server in self.reasons

    def note(self, server: str, code: str, why: str) -> None:
        """``server`` falls back to the SDK's client: logged and counted the first time."""
        if server in self.reasons:
            return
        self.reasons[server] = code
        log.warning("upstream %s: the gateway's lean client cannot handshake (%s: %s); "
                    "using the SDK's client, several times slower per call", server, code, why)
        if self._counted is not None:
            self._counted(server, code)
