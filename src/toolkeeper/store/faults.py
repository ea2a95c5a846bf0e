"""Which database errors mean "the store is unavailable" (connection refused or lost, a
pool that found no connection in time, a SQLite file that is read-only or full): the one
rule every face uses to answer ``store_unavailable`` (HTTP 503 + ``Retry-After``) instead
of an internal error."""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

RETRY_AFTER_S = 1
"""What a client is told to wait before retrying: the pool reconnects on the next
checkout once the database answers again."""


_SQLITE_MARKERS = ("locked", "busy", "readonly", "read-only", "disk is full",
                   "disk i/o error", "unable to open")
"""What SQLite says when its file, not the statement, is the problem (it raises
``OperationalError`` for syntax errors too)."""


def is_store_unavailable(error: BaseException) -> bool:
    """``error`` (or what it was raised from) is the database being down, unreachable,
    saturated or unable to write, rather than a bug of ours or a bad statement."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sa_exc.TimeoutError):  # no pooled connection in time
            return True
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        if _driver_unavailable(current):
            return True
        current = (current.orig if isinstance(current, sa_exc.DBAPIError)
                   else current.__cause__ or current.__context__)
    return False


def _driver_unavailable(error: BaseException) -> bool:
    """A PEP 249 driver error (psycopg, sqlite3) of the connection or the file."""
    names = {c.__name__ for c in type(error).__mro__}
    module = type(error).__module__
    if module.startswith("sqlite3"):
        return "OperationalError" in names and any(
            m in str(error).lower() for m in _SQLITE_MARKERS)
    if module.startswith("psycopg"):
        return bool(names & {"OperationalError", "InterfaceError"})
    return False


def unavailable_message(error: BaseException) -> str:
    """The message callers see: the kind of failure, never the driver's text (which names
    hosts and may quote statements)."""
    return (f"the store (database) is unavailable ({type(error).__name__}); "
            f"retry after {RETRY_AFTER_S} s")
