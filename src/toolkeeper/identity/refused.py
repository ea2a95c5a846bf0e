"""Why a bearer token was not accepted: one exception, carried to the faces, which answer
it with its status and an RFC 6750 challenge (:mod:`toolkeeper.identity.metadata`)."""

from __future__ import annotations

from toolkeeper.model.reasons import Reason


class TokenRefused(Exception):
    """A presented token is not accepted.

    ``status`` 401 (``invalid_token``: unknown, expired, wrongly signed, for another
    audience…) or 403 (a valid token that maps to no agent or role here: presenting it
    again will not help, so the client is not sent back to the authorization server).
    The message is for the caller and never contains the token.
    """

    def __init__(self, message: str, *, status: int = 401,
                 reason: Reason = Reason.UNAUTHENTICATED) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason

    @property
    def error(self) -> str | None:
        """The RFC 6750 ``error`` of the challenge (``None`` for a 403 mapping refusal)."""
        return "invalid_token" if self.status == 401 else None
