"""What the client raises, in the library's families (``toolkeeper.errors``):

    ToolkeeperError
    ├── CallStopped            ``call_or_raise``: exactly as ``Gateway.call_or_raise``
    ├── OperationRefused
    │   └── RequestRefused     the server answered with its error shape (any endpoint but
    │                          execute, whose refusals come back as call results)
    ├── ServerUnavailable      no answer within the client's bounded wait (``unavailable``)
    └── ServerTooOld           the server is older than the oldest this client speaks with
"""

from __future__ import annotations

from typing import Any

from toolkeeper.errors import OperationRefused, ToolkeeperError
from toolkeeper.model.reasons import Reason


class RequestRefused(OperationRefused):
    """The server refused a request: ``reason`` is its stable code, ``status_code`` the
    HTTP status, ``details`` what the error shape carried."""

    def __init__(self, status_code: int, reason: str, message: str,
                 details: dict[str, Any] | None = None) -> None:
        self.status_code = status_code
        super().__init__(reason, message, **(details or {}))


class ServerUnavailable(ToolkeeperError):
    """The server did not answer within the bounded wait (down, unreachable, or 503 on
    every attempt). ``may_have_applied``: a request was sent and its answer lost, so a
    non-idempotent operation (approve, deny) may have taken effect; check before redoing."""

    reason = Reason.UNAVAILABLE

    def __init__(self, message: str, *, may_have_applied: bool = False) -> None:
        self.message = message
        self.may_have_applied = may_have_applied
        super().__init__(f"{Reason.UNAVAILABLE.value}: {message}")


class ServerTooOld(ToolkeeperError):
    """The server names a version (``X-Toolkeeper-Version``) older than the oldest this
    client speaks with: upgrade the server, or install the client of the server's version."""

    def __init__(self, base_url: str, server_version: str, client_version: str,
                 minimum: str) -> None:
        self.server_version = server_version
        self.client_version = client_version
        self.minimum = minimum
        super().__init__(
            f"the toolkeeper server at {base_url} is version {server_version}; this client "
            f"(toolkeeper-client {client_version}) needs a server of version {minimum} or "
            f"newer: upgrade the server, or install toolkeeper-client=={server_version}")
