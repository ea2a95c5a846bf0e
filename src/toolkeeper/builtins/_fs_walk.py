"""Descriptor-relative file access for the ``filesystem`` built-in.

Every path is walked from an open descriptor of the root, one component at a time, with
``O_NOFOLLOW`` (``openat`` style): a symbolic link anywhere on the way, even one swapped in
after a check, makes the open itself fail, so what is opened is always below the root.
Checking the string and then opening by name would leave that window open.

Writes go to a temporary file in the same directory, are fsynced and renamed over the
target, so a failed or killed write leaves the old file or none, never half of one. The
previous content of an overwritten file is kept (a hard link, no copy) in ``UNDO_DIR``
under the root until the write is compensated; that directory is closed to the agent.
The new file never keeps the replaced one's execute, setuid, setgid or sticky bits.

A regular file with more than one hard link is neither read nor appended to: the other
name may be outside the root (``ln /etc/shadow root/x`` by anyone who can write there), and
the check is made on the open descriptor (``fstat``), so the file cannot be swapped after it.

Git's own files are closed to every changing action (``guard_git``): a path with a ``.git``
component (any case, at any depth, also a ``.git`` file), a directory on the way that is a
git directory (a bare repository, a ``.git`` renamed), or a root inside one. Writing there
would hand git a hook or a config naming a program, which git runs as the gateway's user.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.reasons import Reason

UNDO_DIR = ".toolkeeper-undo"
"""Directory under the root holding previous contents until a write is compensated."""
MAX_PATH_CHARS = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CHUNK = 1 << 20


def split(path: object, *, allow_root: bool = False) -> list[str]:
    """A relative path's components, or deny: absolute, ``..``, NUL, the undo directory."""
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS:
        raise ToolDenied(Reason.INVALID_PATH, "path must be a string of at most 4096 characters")
    if "\0" in path:
        raise ToolDenied(Reason.INVALID_PATH, "path contains a NUL byte")
    if path.startswith("/"):
        raise ToolDenied(Reason.PATH_OUTSIDE_ROOT, f"absolute path {path[:200]!r} is refused")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolDenied(Reason.PATH_OUTSIDE_ROOT, f"path {path[:200]!r} contains '..'")
    if parts and parts[0] == UNDO_DIR:
        raise ToolDenied(Reason.PATH_OUTSIDE_ROOT, f"{UNDO_DIR} is reserved for the gateway")
    if not parts and not allow_root:
        raise ToolDenied(Reason.INVALID_PATH, "path names the root itself")
    return parts


def is_git_name(name: str) -> bool:
    """``.git`` in any case, also as case-insensitive or 8.3 file systems may spell it."""
    low = name.lower().rstrip(". ")
    return low == ".git" or low == "git~1"


def _git_dir_at(dir_fd: int) -> bool:
    """Whether the directory ``dir_fd`` is a git directory (what git itself looks for)."""
    def kind_of(name: str) -> int:
        try:
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError:
            return 0
    head = kind_of("HEAD")
    if not (stat.S_ISREG(head) or stat.S_ISLNK(head)):
        return False
    return stat.S_ISREG(kind_of("commondir")) or (
        stat.S_ISDIR(kind_of("objects")) and stat.S_ISDIR(kind_of("refs")))


def git_refusal(what: str) -> ToolDenied:
    return ToolDenied(Reason.PATH_NOT_ALLOWED, f"{what} is inside a git directory; git's "
                      "files (hooks, config) are never changed through this tool")


def shown(parts: list[str]) -> str:
    return "/".join(parts) or "."


def link_refusal(what: str) -> ToolDenied:
    """A symbolic link on the way: it could lead anywhere, so it is never followed."""
    return ToolDenied(Reason.PATH_OUTSIDE_ROOT,
                      f"{what} is or passes a symbolic link; links are not followed")


def refusal(exc: OSError, what: str) -> ToolDenied | ToolError:
    code = exc.errno
    if code == errno.ELOOP:
        return link_refusal(what)
    if code == errno.ENOENT:
        return ToolDenied(Reason.PATH_NOT_FOUND, f"{what} does not exist")
    if code == errno.ENOTDIR:
        return ToolDenied(Reason.NOT_A_DIRECTORY, f"a component of {what} is not a directory")
    if code == errno.EISDIR:
        return ToolDenied(Reason.NOT_A_FILE, f"{what} is a directory")
    if code == errno.EEXIST:
        return ToolDenied(Reason.ALREADY_EXISTS, f"{what} already exists")
    if code == errno.ENOTEMPTY:
        return ToolDenied(Reason.DIRECTORY_NOT_EMPTY, f"{what} is not empty")
    if code == errno.EINVAL:
        return ToolError(Reason.INVALID_ARGUMENTS, f"{what}: not possible (a directory into "
                         "itself?)")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ToolDenied(Reason.FORBIDDEN, f"{what}: permission denied by the host")
    return ToolError(Reason.TOOL_ERROR, f"{what}: {os.strerror(code or 0)}")


@contextlib.contextmanager
def os_errors(what: str) -> Iterator[None]:
    """Translate ``OSError`` into a stable reason naming ``what`` (never a raw repr)."""
    try:
        yield
    except OSError as exc:
        raise refusal(exc, what) from None


def kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "symlink" if stat.S_ISLNK(mode) else "other"


@dataclass(slots=True)
class Root:
    """An open root directory; ``close`` it (or use it as a context manager)."""

    fd: int
    path: str = ""

    @classmethod
    def open(cls, path: str) -> Root:
        real = os.path.realpath(path)
        try:
            return cls(os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), real)
        except OSError:
            raise ToolError(Reason.TOOL_ERROR, "the filesystem root is not a directory") from None

    def guard_git(self, parts: list[str]) -> None:
        """Refuse (``path_not_allowed``) a change to ``parts`` when it names or lies in a git
        directory, or the root does (see the module docstring)."""
        what = shown(parts)
        if any(is_git_name(p) for p in parts):
            raise git_refusal(what)
        ancestors = [self.path, *(str(p) for p in Path(self.path).parents)]
        if any(is_git_name(p) for p in Path(self.path).parts) or any(
                _git_dir_path(a) for a in ancestors[1:]):
            raise git_refusal(what)
        fd = os.dup(self.fd)
        try:
            for i in range(len(parts)):
                if _git_dir_at(fd):
                    raise git_refusal(what)
                if i == len(parts) - 1:
                    break
                nxt = _open_dir_at(fd, parts[i], shown(parts[: i + 1]))
                os.close(fd)
                fd = nxt
        finally:
            os.close(fd)

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self.fd)

    def open_dir(self, parts: list[str]) -> int:
        """A new descriptor of the directory ``parts`` (walked without following links)."""
        fd = os.dup(self.fd)
        try:
            for i, name in enumerate(parts):
                nxt = _open_dir_at(fd, name, shown(parts[: i + 1]))
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def parent(self, parts: list[str]) -> Iterator[int]:
        """The descriptor of the directory holding ``parts[-1]``."""
        fd = self.open_dir(parts[:-1])
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def undo_dir(self) -> Iterator[int]:
        with contextlib.suppress(FileExistsError):
            os.mkdir(UNDO_DIR, 0o700, dir_fd=self.fd)
        with os_errors(UNDO_DIR):
            fd = os.open(UNDO_DIR, _DIR_FLAGS, dir_fd=self.fd)
        try:
            yield fd
        finally:
            os.close(fd)


def _git_dir_path(path: str) -> bool:
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return False
    try:
        return _git_dir_at(fd)
    finally:
        os.close(fd)


def _open_dir_at(dir_fd: int, name: str, what: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except NotADirectoryError:  # O_DIRECTORY | O_NOFOLLOW on a link says ENOTDIR
        st = lstat(dir_fd, name, what)
        if st is None:
            raise refusal(OSError(errno.ENOENT, "gone"), what) from None
        if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):  # a link (maybe swapped out)
            raise link_refusal(what) from None
        raise refusal(OSError(errno.ENOTDIR, "not a directory"), what) from None
    except OSError as exc:
        raise refusal(exc, what) from None


def lstat(dir_fd: int, name: str, what: str) -> os.stat_result | None:
    """``lstat`` of ``name`` in ``dir_fd``, ``None`` when it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise refusal(exc, what) from None


def read_file(dir_fd: int, name: str, what: str, cap: int) -> bytes:
    """The whole regular file, refused with ``file_too_large`` beyond ``cap`` bytes."""
    with os_errors(what):
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolDenied(Reason.NOT_A_FILE, f"{what} is a {kind(st.st_mode)}, not a file")
        refuse_hard_link(st, what)
        if st.st_size > cap:
            raise ToolDenied(Reason.FILE_TOO_LARGE, f"{what} has {st.st_size} bytes > {cap}")
        buf = bytearray()
        while chunk := os.read(fd, min(_CHUNK, cap + 1 - len(buf))):
            buf += chunk
            if len(buf) > cap:  # it grew while we read
                raise ToolDenied(Reason.FILE_TOO_LARGE, f"{what} has more than {cap} bytes")
        return bytes(buf)
    finally:
        os.close(fd)


def refuse_hard_link(st: os.stat_result, what: str) -> None:
    """A regular file with another name may be one outside the root: refused."""
    if st.st_nlink > 1:
        raise ToolDenied(Reason.PATH_NOT_ALLOWED, f"{what} has {st.st_nlink} hard links; "
                         "another name could be outside the root")


_PROGRAM_BITS = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_ISUID | stat.S_ISGID


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def filled_temp(dir_fd: int, name: str, data: bytes, mode: int, what: str) -> str:
    """A complete, fsynced temporary file next to ``name``; returns its name. Written
    anonymously (``O_TMPFILE``) where the filesystem allows, so a write killed midway leaves
    nothing behind; it is linked under a name only once complete."""
    tmp = f".{name[:100]}.tk-{secrets.token_hex(6)}.tmp"
    anonymous = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666, dir_fd=dir_fd) \
            if anonymous else -1
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise refusal(exc, what) from None
        anonymous = False
    if not anonymous:
        with os_errors(what):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        try:
            with os_errors(what):
                if mode >= 0:  # the replaced file's read/write bits, never x, s or t
                    os.fchmod(fd, mode & 0o666)
                _write_all(fd, data)
                os.fsync(fd)
                if anonymous:
                    os.link(f"/proc/self/fd/{fd}", tmp, dst_dir_fd=dir_fd,
                            follow_symlinks=True)
        finally:
            os.close(fd)
    except BaseException:
        if not anonymous:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
        raise
    return tmp


def replace_file(dir_fd: int, name: str, data: bytes, mode: int, what: str) -> None:
    """Atomically make ``name`` hold ``data``: complete temp file, rename, fsync the dir."""
    commit_temp(dir_fd, filled_temp(dir_fd, name, data, mode, what), name, what)


def commit_temp(dir_fd: int, tmp: str, name: str, what: str) -> None:
    """Rename the complete temp file ``tmp`` over ``name`` (or remove it on failure)."""
    try:
        with os_errors(what):
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def append_file(dir_fd: int, name: str, data: bytes, what: str,
                before_write: Callable[[int, bool], None] | None = None) -> tuple[int, bool]:
    """Append ``data``; on an error, none of it stays: ``(size before, created)``.
    ``before_write(size, created)`` runs once the file is open (it may refuse)."""
    created = False
    with os_errors(what):
        try:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
                         | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL
                         | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
            created = True
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolDenied(Reason.NOT_A_FILE, f"{what} is a {kind(st.st_mode)}, not a file")
        refuse_hard_link(st, what)
        if st.st_mode & _PROGRAM_BITS:
            raise ToolDenied(Reason.PATH_NOT_ALLOWED, f"{what} is executable; appending "
                             "would change a program (write replaces it without the x bits)")
        if before_write is not None:
            before_write(st.st_size, created)
        try:
            with os_errors(what):
                _write_all(fd, data)
                os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, st.st_size)
            if created:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
            raise
        return st.st_size, created
    finally:
        os.close(fd)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
