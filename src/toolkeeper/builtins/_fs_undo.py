"""Undo records of the ``filesystem`` built-in, kept in ``UNDO_DIR`` under the root (closed to
agents). A ``write`` or ``append`` returns only an id; what ``restore`` may do — which file,
its expected content or size, the previous content — is read back from the record the tool
wrote itself, so an agent cannot forge an undo into a delete it is not allowed."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from typing import Any

from toolkeeper.builtins._fs_walk import (
    UNDO_DIR,
    Root,
    os_errors,
    read_file,
    refusal,
    replace_file,
)
from toolkeeper.errors import ToolError, ToolSignal
from toolkeeper.model.reasons import Reason

_MAX_RECORD = 64_000
_COPY_CAP = 1 << 62


class Undo:
    """The undo records of one open root."""

    def __init__(self, root: Root) -> None:
        self.root = root

    @staticmethod
    def new_id() -> str:
        return secrets.token_hex(12)

    def keep_previous(self, ident: str, dir_fd: int, name: str) -> None:
        """Keep the current ``name`` as backup ``ident`` (a hard link; a copy across devices)."""
        with self.root.undo_dir() as undo:
            try:
                os.link(name, ident, src_dir_fd=dir_fd, dst_dir_fd=undo, follow_symlinks=False)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise refusal(exc, name) from None
                data = read_file(dir_fd, name, name, _COPY_CAP)
                replace_file(undo, ident, data, 0o600, UNDO_DIR)

    def save(self, ident: str, record: dict[str, Any]) -> None:
        with self.root.undo_dir() as undo:
            replace_file(undo, f"{ident}.json", json.dumps(record).encode(), 0o600, UNDO_DIR)

    def load(self, ident: object) -> dict[str, Any]:
        """The record ``ident``, else ``invalid_arguments`` (unknown, or already undone)."""
        if not isinstance(ident, str) or not ident.isalnum() or len(ident) > 64:
            raise ToolError(Reason.INVALID_ARGUMENTS, "undo.id is not an undo id")
        with self.root.undo_dir() as undo:
            try:
                data = read_file(undo, f"{ident}.json", "undo record", _MAX_RECORD)
            except ToolSignal:
                raise ToolError(Reason.INVALID_ARGUMENTS,
                                f"no undo record {ident} (already undone?)") from None
        record: dict[str, Any] = json.loads(data)
        return record

    def put_back(self, ident: str, dir_fd: int, name: str, what: str) -> None:
        """Rename backup ``ident`` over ``name`` (copy across devices), consuming it."""
        with self.root.undo_dir() as undo, os_errors(f"backup of {what}"):
            try:
                os.replace(ident, name, src_dir_fd=undo, dst_dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                data = read_file(undo, ident, UNDO_DIR, _COPY_CAP)
                replace_file(dir_fd, name, data, -1, what)
                os.unlink(ident, dir_fd=undo)

    def drop(self, ident: str) -> None:
        """Forget record ``ident`` and its backup (undone, or its write did not happen)."""
        with self.root.undo_dir() as undo:
            for name in (ident, f"{ident}.json"):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=undo)
