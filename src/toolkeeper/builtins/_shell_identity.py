"""What a ``shell`` program is, checked by identity rather than by name (issue 26, item 4).

A name pattern cannot list every way to reach an interpreter: ``/usr/bin/ex`` and ``view``
are vim, ``perl5.36-x86_64-linux-gnu`` is perl, ``setarch``, ``prlimit`` and ``unshare`` run
a program given as an argument, and a hard link or copy of ``dash`` can carry any name. So
the program the operator listed (``CommandRule.path``) is resolved at every call — its
``realpath`` and ``(st_dev, st_ino)`` — and refused when

- it is one of the system's interpreters (``INTERPRETERS`` matched against every name in the
  system's program directories, each resolved to its file): the same inode (a hard link,
  an alternatives symlink) or the same content (a copy: same size, same SHA-256) is refused
  (``interpreter_not_allowed``) whatever it is called; the same way, a copy or link of a
  program whose arguments need special reading (``tar``) is read as that program;
- it is not a regular executable file, or it lies where an agent or another user could have
  written it (``command_not_allowed``): inside the shell's own ``cwd`` (where listed
  programs write), in a file or directory owned by a user other than root and the
  gateway's, or writable by group or others, or — when the gateway does not run as root —
  in a file or directory the gateway's own user can write (an agent's ``filesystem`` root
  is such a place).

What the operator lists deliberately (a wrapper script, a program that interprets its
input) runs as listed: the list is the operator's. A tenant names only a path the operator
listed (``toolkeeper.bounds``: ``tenant_bounds.commands`` or the operator's own tool), and
the rules above hold for it the same way. The process sandbox contains what a listed
program does.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

INTERPRETERS = re.compile(
    r"(?:(?:[a-z]*sh|rc|busybox|toybox|env|xargs|find|sudo|su|doas|runuser|pkexec|nohup|"
    r"setsid|timeout|nice|ionice|chrt|taskset|stdbuf|unbuffer|chroot|script|strace|ltrace|gdb|"
    r"watch|flock|parallel|expect|wish|exec|eval|command|builtin|time|at|batch|crontab|"
    r"systemd-run|xdg-open|sed|awk|gawk|mawk|nawk|vim?|nvim|gvim|rvim|rview|view|ex|emacs|ed|"
    r"less|more|man|make|valgrind|"
    r"(?:python|pypy|perl|ruby|php|lua|luajit|node|nodejs|deno|bun|irb|pwsh|osascript|guile|"
    r"tclsh|jshell|java|scala|groovy|R|Rscript|julia|ocaml|erl|escript|elixir)[0-9.]*)"
    r"(?:[-_.][a-z0-9_.+-]*)?"  # a version or platform suffix: perl5.36-x86_64-linux-gnu
    r"|setarch|linux32|linux64|i386|x86_64|arch|prlimit|unshare|nsenter|capsh|setpriv|"
    r"firejail|bwrap|ld-linux.*|ld\.so|ld64\.so.*)(?:\.exe)?",
    re.IGNORECASE,
)
"""Program names no policy can enable: shells, interpreters, programs that run another
program or offer a shell escape — also with a version or platform suffix
(``perl5.36-x86_64-linux-gnu``, ``vim.basic``)."""
SYSTEM_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin",
                   "/bin", "/usr/libexec")
_CHUNK = 1 << 20


def is_interpreter(name: str) -> bool:
    """Whether a program called ``name`` is one no policy may enable (by name)."""
    return INTERPRETERS.fullmatch(Path(name).name) is not None


_Files = tuple[dict[tuple[int, int], str], dict[int, tuple[tuple[str, str], ...]]]


def _files(match: Callable[[str], bool]) -> _Files:
    """The files in the system's program directories whose name ``match`` accepts, each
    resolved: by ``(st_dev, st_ino)`` -> a name, and by size -> ``(path, name)``."""
    ids: dict[tuple[int, int], str] = {}
    sizes: dict[int, set[tuple[str, str]]] = {}
    for directory in SYSTEM_BIN_DIRS:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if not match(name):
                continue
            real = os.path.realpath(os.path.join(directory, name))
            try:
                st = os.stat(real)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                ids.setdefault((st.st_dev, st.st_ino), name)
                sizes.setdefault(st.st_size, set()).add((real, name))
    return ids, {size: tuple(sorted(p)) for size, p in sizes.items()}


@functools.cache
def interpreter_files() -> _Files:
    """The interpreters installed here (read once per process)."""
    return _files(is_interpreter)


@functools.cache
def named_files(names: frozenset[str]) -> _Files:
    """The programs installed here under one of ``names`` (read once per process)."""
    return _files(lambda name: name in names)


@functools.lru_cache(maxsize=256)
def _digest(path: str, size: int, mtime_ns: int) -> bytes | None:
    try:
        with open(path, "rb") as f:
            h = hashlib.sha256()
            while chunk := f.read(_CHUNK):
                h.update(chunk)
            return h.digest()
    except OSError:
        return None


def same_file(real: str, st: os.stat_result, files: _Files) -> tuple[str, str] | None:
    """``(name, how)`` when the file ``real`` (stat ``st``) is one of ``files``: the same
    inode (a hard link, a symlink) or the same content (a copy), else ``None``."""
    ids, sizes = files
    name = ids.get((st.st_dev, st.st_ino))
    if name is not None:
        return name, "the same file as"
    for other, other_name in sizes.get(st.st_size, ()):
        ost = os.stat(other)
        mine = _digest(real, st.st_size, st.st_mtime_ns)
        if mine is not None and mine == _digest(other, ost.st_size, ost.st_mtime_ns):
            return other_name, "a copy of"
    return None


def interpreter_identity(real: str, st: os.stat_result) -> str | None:
    """The interpreter the file ``real`` (stat ``st``) is, by inode or content, or ``None``."""
    found = same_file(real, st, interpreter_files())
    return None if found is None else f"{found[1]} {found[0]}, an interpreter"


def known_as(real: str, st: os.stat_result, names: frozenset[str]) -> str:
    """The name among ``names`` of the installed program the file ``real`` is (a copy of
    tar called ``archiver`` is ``tar``), else the file's own name."""
    found = same_file(real, st, named_files(names))
    return Path(real).name if found is None else found[0]


def _writable(path: str, st: os.stat_result, *, directory: bool) -> bool:
    """Whether someone other than root could change ``path``: another owner, group or
    others with write permission, or the gateway's own user when it is not root."""
    if st.st_uid not in (0, os.geteuid()):
        return True  # its owner can always change it
    if directory and st.st_mode & stat.S_ISVTX:
        others = False  # a sticky directory: others cannot replace a file they do not own
    else:
        others = bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
    return others or (os.geteuid() != 0 and os.access(path, os.W_OK))


def placement_problem(real: str, cwd: Path) -> str | None:
    """Why the program file ``real`` lies where it could have been written by an agent or
    another user, or ``None`` (see the module docstring)."""
    path = Path(real)
    if path.is_relative_to(cwd):
        return "lies inside the working directory, where listed programs write"
    try:
        st = os.stat(real)
        parent = os.stat(path.parent)
    except OSError:
        return "cannot be examined"
    if _writable(real, st, directory=False):
        return "is a file others or the gateway's own user can write"
    if _writable(str(path.parent), parent, directory=True):
        return "lies in a directory others or the gateway's own user can write"
    return None
