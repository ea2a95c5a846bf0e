"""PostgreSQL: a group commit batch of claims and finishes in one round trip.

A batch's usual transaction costs about six round trips (begin, claims, finishes, each
tenant's chain head locked then moved, the events, commit), each an exchange with the
server, against one for a bare insert in autocommit. Here the batch is one call of
``toolkeeper_group_apply`` (migration 0017) in autocommit: its own transaction, committed
by the server at once.

The audit key never leaves the process, so the events are chained here, before the call,
from the head this process last wrote for each tenant (``heads``: every batch tells it,
this path's or the usual one's, and so does every other append of this process). The
function moves a head only if it is still exactly that one (seq, hash, base and MAC) and
every claim wins its key; else it answers a refusal (a head that moved, returned as it is
now; a key already taken), raising nothing (no error in the server's log), having written
nothing (found before writing: no flush at its commit) or undone what it wrote (a
subtransaction). Two processes' batches on one head wait for each other's commit (an
advisory lock) before checking it. Each of the four parts is its own parameter (the server
parses each once). A head that moved is chained onto and the statement retried (a few
times at most); anything else, or a tenant this process never wrote, runs the batch's
usual transaction, which locks the heads, reads where they
are and tells ``heads``. So another process, a replica or retention writing the chain
costs one round trip more; a key already taken (its claim's events are not to be
written) one more than the usual transaction; neither can fork a chain, and the unique
``(tenant_key, seq)`` stays behind it all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolkeeper.store.audit_chain import Head, Prepared, by_tenant, link_onto, remember
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.raw import RawTxn, dump_json

CALL = "SELECT toolkeeper_group_apply(%s::json, %s::json, %s::json, %s::json)"
UNDEFINED_FUNCTION = "42883"
HEAD_MOVED_TRIES = 4
"""Statements one batch may take while other processes keep moving its head: each refused
one wrote nothing (a wait for the other's commit, a round trip); then the usual
transaction. Two processes calling in turn on one chain: about 1 batch in 4 ran the usual
transaction with 2 tries, 1 in 100 with 4 (calls/s +8-45 %)."""


class Fallback:
    """Why batches took the usual path, for tests and metrics."""

    __slots__ = ("counts", "off", "usual")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        """Statements refused or not tried, by why."""
        self.usual = 0
        """Batches that then ran as the usual transaction."""
        self.off = False
        """The function is not there (a database not migrated): the usual path only."""

    def add(self, why: str) -> None:
        self.counts[why] = self.counts.get(why, 0) + 1


def chain(prepared: Prepared, key: AuditKey | None,
          heads: dict[str, Head]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """Chain ``prepared`` onto the remembered heads: the event rows and the head moves
    (what each head must still be, what it becomes), or ``None`` if a tenant's head is
    not known (or keyed while this process has no key: the usual path refuses that)."""
    rows: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    for tenant_key, items in by_tenant(prepared):
        head = heads.get(tenant_key)
        if head is None or (key is None and head[2] is not None):
            return None
        moves.append(link_onto(tenant_key, head, items, key, rows))
    return rows, moves


def apply_once(txn: RawTxn, claims: Sequence[dict[str, Any]],
               finishes: Sequence[dict[str, Any]], prepared: Prepared,
               key: AuditKey | None, heads: dict[str, Head],
               fallback: Fallback) -> list[bool] | None:
    """The batch in one statement: each finish's result (every claim won), or ``None``
    when nothing was written and the usual transaction must run (``fallback`` says why).

    ``claims``: outcome rows in key order; ``finishes``: the finish's parameters each,
    with its side effect row (or ``None``) under ``effect``; ``prepared``: every event of
    the batch, the claims' included. A head that moved is reported by the refusal: the
    events are chained again onto it and the statement tried again, up to
    ``HEAD_MOVED_TRIES`` in all (another process writing the same chain then costs a
    round trip or a few, not a transaction's six)."""
    done = _apply(txn, claims, finishes, prepared, key, heads, fallback)
    fallback.usual += done is None
    return done


def _apply(txn: RawTxn, claims: Sequence[dict[str, Any]], finishes: Sequence[dict[str, Any]],
           prepared: Prepared, key: AuditKey | None, heads: dict[str, Head],
           fallback: Fallback) -> list[bool] | None:
    written: tuple[str | None, ...] = ()  # claims and finishes: encoded once for all tries
    for attempt in range(HEAD_MOVED_TRIES):
        linked = chain(prepared, key, heads)
        if linked is None:
            fallback.add("head_unknown")
            return None
        rows, moves = linked
        try:
            written = written or (dump_json(claims), dump_json(finishes))
            params = (*written, dump_json(moves), dump_json(rows))
        except TypeError:  # a value orjson does not write: the driver's adapters may
            fallback.add("unencodable")
            return None
        try:
            res = txn.call(CALL, params)
        except Exception as exc:  # not a refusal (those are answered): a failure
            state = getattr(exc, "sqlstate", None)
            if state is None:  # not the server refusing the statement: the connection
                raise
            fallback.off = state == UNDEFINED_FUNCTION
            fallback.add(state)
            return None
        refused = res.get("refused")
        if refused is None:
            for m in moves:
                remember(heads, m["k"], (m["seq"], m["hash"], m["mac"], m["base_seq"],
                                         m["base_hash"]))
            return list(res["done"])
        fallback.add(refused)
        if (refused != "head_moved" or attempt == HEAD_MOVED_TRIES - 1
                or not _seen(res.get("head"), heads)):
            return None
    return None


def _seen(head: Any, heads: dict[str, Head]) -> bool:
    """Remember the head a refusal reports (as the server saw it), if it does."""
    try:
        seen: Head = (int(head["seq"]), str(head["hash"]), head["mac"],
                      int(head["base_seq"]), head["base_hash"])
        tenant_key = str(head["k"])
    except (TypeError, KeyError, ValueError):
        return False
    remember(heads, tenant_key, seen)
    return True
