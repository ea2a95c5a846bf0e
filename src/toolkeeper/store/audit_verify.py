"""Recomputing one tenant's audit chain: every event, the head, and the checkpoints.

The rules (docs/audit-integrity.md says what they catch):

- events are numbered 1, 2, … with no gap, each linked to its predecessor's hash;
- a ``sha256:`` event must recompute; a ``hmac-sha256:`` event must recompute under the key;
- once a keyed event appears, a later unkeyed one is a downgrade;
- the head names the last event and, with a key, carries a valid MAC;
- without a key a keyed chain cannot be checked (a problem), an unkeyed one is a warning;
- every checkpoint's ``(seq, hash)`` is still in the chain and the head is at or past it;
- after audit retention the chain starts at the head's base (``base_seq``, ``base_hash``:
  the last deleted event), which the head's MAC covers; checkpoints before the base name
  deleted events and are skipped, one at the base must match its hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolkeeper.store.audit_checkpoints import Checkpoint, Checkpoints
from toolkeeper.store.audit_key import KEYED, PLAIN, AuditKey
from toolkeeper.store.records import VerifyReport


@dataclass(slots=True)
class ChainWalk:
    """The state of one pass over a chain, in ``seq`` order."""

    tenant_key: str
    key: AuditKey | None
    report: VerifyReport
    genesis: str
    marks: dict[int, list[Checkpoint]] = field(default_factory=dict)
    prev: str = ""
    last: int = 0
    keyed: int = 0

    def __post_init__(self) -> None:
        self.prev = self.genesis

    def problem(self, text: str) -> None:
        self.report.problems.append(text)

    def load_checkpoints(self, checkpoints: Checkpoints | None) -> None:
        if checkpoints is None:
            if self.key is not None:
                self.report.warnings.append(
                    "no checkpoint file configured: a rollback to a saved head row would "
                    "not be detected")
            return
        read = checkpoints.read(self.tenant_key)
        if not read.found:
            self.report.warnings.append(
                f"checkpoint file {checkpoints.path} not found (none written yet, or deleted)")
        self.report.problems.extend(read.problems)
        for cp in read.entries:
            self.marks.setdefault(cp.seq, []).append(cp)

    def start(self, base_seq: int, base_hash: str | None) -> None:
        """Begin after the events retention deleted (``base_seq`` 0: at genesis)."""
        if not base_seq:
            return
        self.last, self.prev = base_seq, base_hash or ""
        if self.prev.startswith(KEYED):
            self.keyed += 1  # an unkeyed event after a keyed base is still a downgrade
        self.report.first_seq = base_seq + 1
        for seq in [s for s in self.marks if s <= base_seq]:
            for cp in self.marks.pop(seq):
                if seq == base_seq and cp.hash != base_hash:
                    self.problem(f"the chain's base (seq {seq}, where retention cut it) "
                                 f"differs from checkpoint line {cp.line} ({cp.ts})")

    def event(self, m: dict[str, Any], plain_hash: Any, body: Any) -> None:
        """Check one stored event (``plain_hash(m)``/``body(m)`` recompute it)."""
        seq, hash_ = m["seq"], m["hash"]
        self.report.events += 1
        if seq != self.last + 1:
            self.problem(f"seq {self.last + 1} missing (found {seq})")
        if m["prev_hash"] != self.prev:
            self.problem(f"seq {seq}: prev_hash does not match")
        if hash_.startswith(KEYED):
            self.keyed += 1
            if self.key is not None and not AuditKey.matches(
                    self.key.event(seq, m["prev_hash"], body(m)), hash_):
                self.problem(f"seq {seq}: event was altered (or the audit key differs)")
        elif hash_.startswith(PLAIN):
            if self.keyed:
                self.problem(f"seq {seq}: unkeyed event after keyed events "
                             "(chain downgraded to plain SHA-256)")
            if plain_hash(m) != hash_:
                self.problem(f"seq {seq}: event was altered")
        else:
            self.problem(f"seq {seq}: unknown hash algorithm")
        for cp in self.marks.pop(seq, ()):
            if cp.hash != hash_:
                self.problem(f"seq {seq} differs from checkpoint line {cp.line} ({cp.ts})")
        self.prev, self.last = hash_, seq

    def finish(self, head: Any) -> VerifyReport:
        """Check the head row (``None``: missing) and what the checkpoints still expect."""
        events = self.report.events
        if head is None:
            if events:
                self.problem(f"chain has {events} events but no head")
        elif head.seq != self.last or head.hash != self.prev:
            self.problem(f"chain ends at seq {self.last} but head records seq {head.seq}")
        self._head_mac(head)
        for seq in sorted(self.marks):
            for cp in self.marks[seq]:
                if seq > self.last:
                    self.problem(f"checkpoint line {cp.line} ({cp.ts}) records seq {seq} but "
                                 f"the chain ends at seq {self.last} (events deleted, head "
                                 "rolled back)")
                else:
                    self.problem(f"seq {seq} of checkpoint line {cp.line} is missing")
        self.report.ok = not self.report.problems
        return self.report

    def _head_mac(self, head: Any) -> None:
        mac = None if head is None else head.mac
        if self.key is None:
            if mac is not None or self.keyed:
                self.problem(f"the chain is keyed but no audit key is configured: its "
                             f"{self.keyed} keyed events and head were not checked")
            elif self.report.events:
                self.report.warnings.append(
                    "unkeyed chain (plain SHA-256): no audit key is configured, so anyone "
                    "who can write the database could rewrite it undetected")
            return
        if head is None or not (self.report.events or head.seq):
            return
        if mac is None:
            self.problem("chain head is not sealed with the audit key (chain rewritten as "
                         "unkeyed, or written before the key and not yet sealed by a gateway)")
        elif not AuditKey.matches(self.key.head(self.tenant_key, head.seq, head.hash,
                                                head.base_seq, head.base_hash), mac):
            self.problem("chain head's MAC does not match (head moved or replaced, or a "
                         "different audit key)")
