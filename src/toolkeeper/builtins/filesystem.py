"""Built-in ``filesystem`` tool: list, stat, read, write, append, move, delete and glob under
one configured root (SPEC §11).

Paths are root-relative; absolute paths, ``..`` and NUL bytes are refused, and every open
walks from a descriptor of the root without following symbolic links (``_fs_walk``), so a
link cannot lead outside, even one swapped in after a check. Read-only unless the policy
sets ``allow_write`` (``delete`` needs ``allow_delete``). ``write``, ``append`` and ``move``
are compensatable: ``restore`` (or the reverse ``move``) undoes them, and refuses with
``file_changed`` when the file was changed since. ``delete`` is irreversible.

No changing action touches git's files (a ``.git`` component in any case, a git directory
on the way, a root inside one: ``path_not_allowed``), so an agent holding ``filesystem`` and
``git`` cannot plant a hook or a config for git to run. A file with several hard links is
neither read nor appended to (``path_not_allowed``: another name may be outside the root);
``append`` refuses an executable file; ``write`` never keeps x, setuid or setgid bits.

``write`` is atomic even when the process is killed (anonymous temp file, rename). ``append``
writes in place: on an error it truncates back, but a process killed in the middle of a large
append may leave part of it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import stat
from typing import Annotated, Any, ClassVar

from pydantic import Field

from toolkeeper.bounds import AtMost, HostPath, Permission
from toolkeeper.builtins import _fs_walk as fsw
from toolkeeper.builtins._fs_content import as_text, decoded, diff
from toolkeeper.builtins._fs_glob import Pattern, walk
from toolkeeper.builtins._fs_undo import Undo
from toolkeeper.model.call import PreviewResult
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, Compensation, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

_Parts = list[str]
_Entries = list[dict[str, Any]]


class FilesystemPolicy(ToolPolicy):
    """Guardrails of the filesystem tool; the defaults are a read-only viewer."""

    root: Annotated[str | None, HostPath()] = None
    """The directory the tool works in; required, and never left. A tenant may set it only
    within the operator's ceiling (``toolkeeper.bounds``)."""
    allow_write: Annotated[bool, Permission()] = False
    """``write``, ``append``, ``move`` and ``restore`` are refused (``write_not_allowed``)
    unless set."""
    allow_delete: Annotated[bool, Permission()] = False
    """``delete`` is refused (``delete_not_allowed``) unless set."""
    max_read_bytes: Annotated[int, AtMost()] = Field(default=256_000, ge=1, le=1_000_000)
    """A larger file is refused (``file_too_large``); at most 1 MB, so that even base64 of
    it fits the tool's output cap."""
    max_write_bytes: Annotated[int, AtMost()] = Field(default=256_000, ge=1, le=50_000_000)
    """Content of one ``write`` or ``append``; more is refused (``file_too_large``)."""
    max_list_entries: Annotated[int, AtMost()] = Field(default=1000, ge=1, le=100_000)
    """``list`` returns at most this many entries and says ``truncated``."""
    max_glob_results: Annotated[int, AtMost()] = Field(default=1000, ge=1, le=100_000)
    """``glob`` returns at most this many paths and says ``truncated``."""
    max_glob_scanned: Annotated[int, AtMost()] = Field(default=100_000, ge=1, le=10_000_000)
    """``glob`` stops (``truncated``) after looking at this many entries."""

    def refusal(self, action: str) -> tuple[Reason, str] | None:
        """Also: a write action without ``allow_write``, ``delete`` without
        ``allow_delete`` (so a read-only filesystem lists none of them)."""
        if action in _WRITES and not self.allow_write:
            return Reason.WRITE_NOT_ALLOWED, f"this policy does not allow {action}"
        if action == "delete" and not self.allow_delete:
            return Reason.DELETE_NOT_ALLOWED, "this policy does not allow delete"
        return super().refusal(action)


def _spec(text: str, effect: SideEffect, props: dict[str, Any], *required: str) -> ActionSpec:
    schema = {"type": "object", "properties": props, "required": list(required),
              "additionalProperties": False}
    return ActionSpec(description=text, input_schema=schema, side_effect=effect)


_PATH: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": fsw.MAX_PATH_CHARS}
_ENC: dict[str, Any] = {"type": "string", "enum": ["utf-8", "base64"]}
_CONTENT = {"content": {"type": "string"}, "encoding": _ENC, "path": _PATH}
_UNDO: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["id"],
                         "properties": {"id": {"type": "string", "maxLength": 64}}}
_PURE, _COMP = SideEffect.PURE, SideEffect.COMPENSATABLE
_ACTIONS: dict[str, ActionSpec] = {
    "list": _spec("Entries of a directory (default: the root).", _PURE, {"path": _PATH}),
    "stat": _spec("Type, size, mode and modification time; links are not followed.", _PURE,
                  {"path": _PATH}, "path"),
    "read": _spec("A file's content: UTF-8 text, or base64 when it is not text.", _PURE,
                  {"path": _PATH}, "path"),
    "glob": _spec("Paths matching a pattern (*, ?, [..] in a component; ** across).", _PURE,
                  {"pattern": _PATH}, "pattern"),
    "write": _spec("Create or replace a file atomically.", _COMP, _CONTENT, "path", "content"),
    "append": _spec("Append to a file (created if missing).", _COMP, _CONTENT,
                    "path", "content"),
    "move": _spec("Move or rename a file or directory; never replaces an existing one.", _COMP,
                  {"source": _PATH, "destination": _PATH}, "source", "destination"),
    "delete": _spec("Delete a file or an empty directory.", SideEffect.IRREVERSIBLE,
                    {"path": _PATH}, "path"),
    "restore": _spec("Undo a write or append (the compensation): puts the previous content "
                     "back unless the file changed since.", SideEffect.IDEMPOTENT,
                     {"path": _PATH, "undo": _UNDO}, "path", "undo"),
}
_WRITES = ("write", "append", "move", "restore")


def _stat_dict(path: str, st: os.stat_result) -> dict[str, Any]:
    return {"path": path, "type": fsw.kind(st.st_mode), "size": st.st_size,
            "mode": oct(stat.S_IMODE(st.st_mode)), "mtime": st.st_mtime}


class _Session:
    """One call on the open root: the context, its policy and the root descriptor."""

    def __init__(self, ctx: ToolContext, policy: FilesystemPolicy, root: fsw.Root) -> None:
        self.ctx, self.policy, self.root = ctx, policy, root
        self.undo = Undo(root)

    def list(self, req: dict[str, Any]) -> dict[str, Any]:
        parts = fsw.split(req.get("path", "."), allow_root=True)
        cap, truncated = self.policy.max_list_entries, False
        entries: _Entries = []
        fd = self.root.open_dir(parts)
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if not parts and entry.name == fsw.UNDO_DIR:
                        continue
                    if len(entries) >= cap:
                        truncated = True
                        break
                    st = entry.stat(follow_symlinks=False)
                    entries.append({"name": entry.name, "type": fsw.kind(st.st_mode),
                                    "size": st.st_size})
        finally:
            os.close(fd)
        entries.sort(key=lambda e: str(e["name"]))
        return {"path": fsw.shown(parts), "entries": entries, "truncated": truncated}

    def stat(self, req: dict[str, Any]) -> dict[str, Any]:
        parts = fsw.split(req.get("path"))
        with self.root.parent(parts) as pfd:
            st = fsw.lstat(pfd, parts[-1], fsw.shown(parts))
        if st is None:
            self.ctx.deny(Reason.PATH_NOT_FOUND, f"{fsw.shown(parts)} does not exist")
        return _stat_dict(fsw.shown(parts), st)

    def read(self, req: dict[str, Any]) -> dict[str, Any]:
        parts = fsw.split(req.get("path"))
        with self.root.parent(parts) as pfd:
            data = fsw.read_file(pfd, parts[-1], fsw.shown(parts), self.policy.max_read_bytes)
        text = as_text(data)
        if text is None:
            return {"path": fsw.shown(parts), "size": len(data), "encoding": "base64",
                    "content": base64.b64encode(data).decode("ascii")}
        return {"path": fsw.shown(parts), "size": len(data), "encoding": "utf-8",
                "content": text}

    def glob(self, req: dict[str, Any]) -> dict[str, Any]:
        pattern = Pattern.parse(req.get("pattern"))
        found: list[str] = []
        truncated = False
        for item in walk(self.root.fd, self.policy.max_glob_scanned):
            if item is None or len(found) >= self.policy.max_glob_results:
                truncated = True
                break
            if pattern.matches(item[0]):
                found.append("/".join(item[0]) + ("/" if item[1] else ""))
        return {"pattern": req["pattern"], "matches": found, "truncated": truncated}

    def _changeable(self, path: object) -> _Parts:
        """The components of a path a changing action may touch: never git's own files."""
        parts = fsw.split(path)
        self.root.guard_git(parts)
        return parts

    def _existing(self, pfd: int, parts: _Parts) -> os.stat_result | None:
        st = fsw.lstat(pfd, parts[-1], fsw.shown(parts))
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise fsw.link_refusal(fsw.shown(parts))
        if st is not None and not stat.S_ISREG(st.st_mode):
            self.ctx.deny(Reason.NOT_A_FILE,
                          f"{fsw.shown(parts)} is a {fsw.kind(st.st_mode)}, not a file")
        return st

    def write(self, req: dict[str, Any]) -> dict[str, Any]:
        data = decoded(self.ctx, req, self.policy.max_write_bytes)
        parts = self._changeable(req.get("path"))
        what, ident = fsw.shown(parts), Undo.new_id()
        record = {"path": what, "sha256": fsw.sha256(data), "kind": "remove"}
        with self.root.parent(parts) as pfd:
            old = self._existing(pfd, parts)
            mode = stat.S_IMODE(old.st_mode) if old is not None else -1
            tmp = fsw.filled_temp(pfd, parts[-1], data, mode, what)  # complete before…
            try:  # …the previous content is kept and the new one renamed into place
                if old is not None:
                    self.undo.keep_previous(ident, pfd, parts[-1])
                    record["kind"] = "replace"
                self.undo.save(ident, record)
                fsw.commit_temp(pfd, tmp, parts[-1], what)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=pfd)
                self.undo.drop(ident)
                raise
        return {"path": what, "bytes": len(data), "created": old is None,
                "undo": {"id": ident}}

    def append(self, req: dict[str, Any]) -> dict[str, Any]:
        data = decoded(self.ctx, req, self.policy.max_write_bytes)
        parts = self._changeable(req.get("path"))
        what, ident = fsw.shown(parts), Undo.new_id()

        def remember(size: int, created: bool) -> None:
            self.undo.save(ident, {"path": what, "kind": "remove", "sha256": fsw.sha256(data)}
                           if created else {"path": what, "kind": "truncate", "size": size,
                                            "expected_size": size + len(data)})

        with self.root.parent(parts) as pfd:
            try:
                before, created = fsw.append_file(pfd, parts[-1], data, what, remember)
            except BaseException:
                self.undo.drop(ident)
                raise
        return {"path": what, "bytes": len(data), "size": before + len(data),
                "created": created, "undo": {"id": ident}}

    def _move_plan(self, req: dict[str, Any]) -> tuple[_Parts, _Parts, os.stat_result]:
        src, dst = self._changeable(req.get("source")), self._changeable(req.get("destination"))
        with self.root.parent(src) as sfd:
            st = fsw.lstat(sfd, src[-1], fsw.shown(src))
        if st is None:
            self.ctx.deny(Reason.PATH_NOT_FOUND, f"{fsw.shown(src)} does not exist")
        if stat.S_ISLNK(st.st_mode):
            raise fsw.link_refusal(fsw.shown(src))
        with self.root.parent(dst) as dfd:
            if fsw.lstat(dfd, dst[-1], fsw.shown(dst)) is not None:
                self.ctx.deny(Reason.ALREADY_EXISTS, f"{fsw.shown(dst)} already exists")
        return src, dst, st

    def move(self, req: dict[str, Any]) -> dict[str, Any]:
        src, dst, st = self._move_plan(req)
        what = f"{fsw.shown(src)} -> {fsw.shown(dst)}"
        with self.root.parent(src) as sfd, self.root.parent(dst) as dfd, fsw.os_errors(what):
            if stat.S_ISDIR(st.st_mode):
                os.rename(src[-1], dst[-1], src_dir_fd=sfd, dst_dir_fd=dfd)
            else:  # link + unlink: atomic "never replace" for files
                os.link(src[-1], dst[-1], src_dir_fd=sfd, dst_dir_fd=dfd,
                        follow_symlinks=False)
                os.unlink(src[-1], dir_fd=sfd)
        return {"source": fsw.shown(src), "destination": fsw.shown(dst),
                "type": fsw.kind(st.st_mode)}

    def delete(self, req: dict[str, Any]) -> dict[str, Any]:
        parts = self._changeable(req.get("path"))
        what = fsw.shown(parts)
        with self.root.parent(parts) as pfd:
            st = fsw.lstat(pfd, parts[-1], what)
            if st is None:
                self.ctx.deny(Reason.PATH_NOT_FOUND, f"{what} does not exist")
            with fsw.os_errors(what):
                if stat.S_ISDIR(st.st_mode):
                    os.rmdir(parts[-1], dir_fd=pfd)
                else:
                    os.unlink(parts[-1], dir_fd=pfd)
        return {"path": what, "type": fsw.kind(st.st_mode), "deleted": True}

    def restore(self, req: dict[str, Any]) -> dict[str, Any]:
        parts, undo = self._changeable(req.get("path")), req.get("undo")
        ident = undo.get("id") if isinstance(undo, dict) else None
        record, what = self.undo.load(ident), fsw.shown(parts)
        assert isinstance(ident, str)
        if record.get("path") != what:
            self.ctx.fail(Reason.INVALID_ARGUMENTS, f"undo {ident} is not for {what}")
        kind = record.get("kind")
        with self.root.parent(parts) as pfd:
            if kind == "truncate":
                self._truncate(pfd, parts[-1], what, record)
            else:
                current = fsw.read_file(pfd, parts[-1], what, self.policy.max_write_bytes)
                if fsw.sha256(current) != record.get("sha256"):
                    self.ctx.deny(Reason.FILE_CHANGED, f"{what} was changed since; not restored")
                if kind == "replace":
                    self.undo.put_back(ident, pfd, parts[-1], what)
                else:
                    with fsw.os_errors(what):
                        os.unlink(parts[-1], dir_fd=pfd)
        self.undo.drop(ident)
        return {"path": what, "restored": kind}

    def _truncate(self, pfd: int, name: str, what: str, undo: dict[str, Any]) -> None:
        size, expected = undo.get("size"), undo.get("expected_size")
        if not isinstance(size, int) or not isinstance(expected, int) or not 0 <= size <= expected:
            self.ctx.fail(Reason.INVALID_ARGUMENTS, "undo sizes are not valid")
        with fsw.os_errors(what):
            fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         dir_fd=pfd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != expected:
                self.ctx.deny(Reason.FILE_CHANGED, f"{what} was changed since; not restored")
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def preview(self, action: str, req: dict[str, Any]) -> PreviewResult:
        """What a changing action would do, after the same checks; nothing changes."""
        if action == "move":
            src, dst, st = self._move_plan(req)
            return PreviewResult(summary=f"move {fsw.shown(src)} to {fsw.shown(dst)}",
                                 data={"source": fsw.shown(src), "destination": fsw.shown(dst),
                                       "type": fsw.kind(st.st_mode), "size": st.st_size})
        parts = self._changeable(req.get("path"))
        what = fsw.shown(parts)
        with self.root.parent(parts) as pfd:
            if action == "delete":
                gone = fsw.lstat(pfd, parts[-1], what)
                if gone is None:
                    self.ctx.deny(Reason.PATH_NOT_FOUND, f"{what} does not exist")
                return PreviewResult(summary=f"delete {fsw.kind(gone.st_mode)} {what}",
                                     data=_stat_dict(what, gone))
            data = decoded(self.ctx, req, self.policy.max_write_bytes)
            old = self._existing(pfd, parts)
            size = 0 if old is None else old.st_size
            before = b"" if old is None else None
            if old is not None and size <= self.policy.max_read_bytes:
                before = fsw.read_file(pfd, parts[-1], what, self.policy.max_read_bytes)
        if action == "append":
            return PreviewResult(
                summary=f"append {len(data)} bytes to {what} ({size} -> {size + len(data)})",
                data={"path": what, "exists": old is not None, "size_before": size,
                      "bytes": len(data), "size_after": size + len(data)})
        return PreviewResult(
            summary=f"{'replace' if old else 'create'} {what}: {size} -> {len(data)} bytes",
            data={"path": what, "exists": old is not None, "size_before": size,
                  "size_after": len(data), **diff(before, data)})


class FilesystemTool(BaseTool):
    """Files under one root: read-only unless the policy allows writes."""

    tool_name = "filesystem"
    description = "List, stat, read, write, append, move, delete and glob files under one root."
    actions = _ACTIONS
    risk_default = Risk.MEDIUM
    risk_map: ClassVar[dict[str, Risk]] = {
        "list": Risk.LOW, "stat": Risk.LOW, "read": Risk.LOW, "glob": Risk.LOW,
        "write": Risk.MEDIUM, "append": Risk.MEDIUM, "move": Risk.MEDIUM,
        "restore": Risk.MEDIUM, "delete": Risk.HIGH,
    }
    side_effect = SideEffect.IRREVERSIBLE
    compensation: ClassVar[dict[str, Compensation]] = {
        "write": Compensation(action="restore",
                              arguments={"path": "result.path", "undo": "result.undo"}),
        "append": Compensation(action="restore",
                               arguments={"path": "result.path", "undo": "result.undo"}),
        "move": Compensation(action="move", arguments={
            "source": "result.destination", "destination": "result.source"}),
    }
    execution = ExecutionMeta(timeout_s=60.0, max_output_chars=2_000_000)
    policy_model = FilesystemPolicy

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Run one action after the policy checks (in a worker thread)."""
        with self._open(action, context) as session:
            return getattr(session, action)(request)

    def preview(
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> PreviewResult | None:
        """What ``write``, ``append``, ``move`` or ``delete`` would change, without changing it."""
        if action not in ("write", "append", "move", "delete"):
            return None
        with self._open(action, context) as session:
            return session.preview(action, request)

    def _open(self, action: str, ctx: ToolContext) -> _Opened:
        policy = self.checked_policy(action, ctx, FilesystemPolicy, label="filesystem action")
        refused = policy.refusal(action)  # the pipeline's resolve refused it already
        if refused is not None:
            ctx.deny(*refused)
        if not policy.root:
            ctx.fail(Reason.TOOL_ERROR, "filesystem policy has no root")
        return _Opened(ctx, policy)


class _Opened:
    """Opens the root for one call and closes it afterwards."""

    def __init__(self, ctx: ToolContext, policy: FilesystemPolicy) -> None:
        self.ctx, self.policy = ctx, policy
        self.root: fsw.Root | None = None

    def __enter__(self) -> _Session:
        assert self.policy.root is not None
        self.root = fsw.Root.open(self.policy.root)
        return _Session(self.ctx, self.policy, self.root)

    def __exit__(self, *exc: object) -> None:
        if self.root is not None:
            self.root.close()
