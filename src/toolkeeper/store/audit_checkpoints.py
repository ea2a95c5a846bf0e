"""Signed checkpoints of the audit chain heads, kept outside the database.

A database writer who saved an old head row (and its MAC) could delete the events after it
and put that row back: the shortened chain is then consistent. The checkpoint file catches
that: the gateway appends ``{"tenant", "seq", "hash", "ts", "mac"}`` lines (one per chain
that moved, at most every ``every_s`` seconds, and when it closes), and verify requires
every checkpointed ``(seq, hash)`` to still be in the chain, with the head at or past it.
Lines are MAC'd with the audit key, so editing them is detected too; deleting lines or the
file is not (keep it where the database's writers cannot write, e.g. another host or an
append-only file).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

from toolkeeper.store.audit_key import AuditKey


@dataclass(slots=True, frozen=True)
class Checkpoint:
    """One checked line of the file: the chain of ``tenant`` had ``hash`` at ``seq``."""

    line: int
    seq: int
    hash: str
    ts: str


@dataclass(slots=True)
class CheckpointRead:
    """The lines of one tenant, and the problems of lines that failed their MAC."""

    found: bool
    entries: list[Checkpoint]
    problems: list[str]


class Checkpoints:
    """An append-only checkpoint file (0600) written by one gateway's audit writer thread."""

    def __init__(self, path: str | Path, key: AuditKey, every_s: float = 10.0) -> None:
        self.path = Path(path)
        self._key = key
        self._every = every_s
        self._next = 0.0
        self._written: dict[str, tuple[int, str]] = {}
        self._made = False

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def write(self, heads: list[tuple[str, int, str]], now: datetime) -> int:
        """Append a line for each head that moved since this process last wrote it (the
        file is made on the first write even with no line: it is configured and in use)."""
        self._next = time.monotonic() + self._every
        ts = now.isoformat()
        lines = []
        for tenant_key, seq, hash_ in heads:
            if self._written.get(tenant_key) == (seq, hash_):
                continue
            mac = self._key.checkpoint(tenant_key, seq, hash_, ts)
            lines.append(orjson.dumps({"tenant": tenant_key, "seq": seq, "hash": hash_,
                                       "ts": ts, "mac": mac}) + b"\n")
            self._written[tenant_key] = (seq, hash_)
        if lines or not self._made:
            # one write() of whole lines with O_APPEND: replicas' lines never interleave
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if lines:
                    os.write(fd, b"".join(lines))
                    os.fsync(fd)
            finally:
                os.close(fd)
            self._made = True
        return len(lines)

    def read(self, tenant_key: str) -> CheckpointRead:
        """The MAC-valid lines of ``tenant_key``; a line that fails its MAC is a problem."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return CheckpointRead(found=False, entries=[], problems=[])
        out = CheckpointRead(found=True, entries=[], problems=[])
        for n, text in enumerate(raw.splitlines(), start=1):
            if not text.strip():
                continue
            try:
                d = orjson.loads(text)
                tenant, seq, hash_, ts = d["tenant"], int(d["seq"]), str(d["hash"]), str(d["ts"])
                mac = d["mac"]
            except (ValueError, KeyError, TypeError):
                out.problems.append(f"checkpoint line {n} is unreadable")
                continue
            if tenant != tenant_key:
                continue
            if not AuditKey.matches(self._key.checkpoint(tenant, seq, hash_, ts), mac):
                out.problems.append(f"checkpoint line {n}: MAC does not match "
                                    "(line edited, or a different audit key)")
                continue
            out.entries.append(Checkpoint(line=n, seq=seq, hash=hash_, ts=ts))
        return out

    def tenants(self) -> set[str]:
        """Every tenant key named in the file (its chains must not vanish)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return set()
        names = set()
        for text in raw.splitlines():
            try:
                names.add(str(orjson.loads(text)["tenant"]))
            except (ValueError, KeyError, TypeError):
                continue
        return names
