"""The OS sandbox every process a tool starts runs in (``shell``, ``git``, artifact workers).

A :class:`Confinement` says what one process may see and do; :meth:`Sandbox.wrap` turns a
program's argument vector into the argument vector of bubblewrap (``bwrap``) around it:

- a new mount namespace built from nothing: ``/usr`` read-only (``/bin``, ``/lib*``,
  ``/sbin`` as on merged-usr Debian), a handful of ``/etc`` files programs read
  (``ld.so.cache``, ``passwd``, ``group``, ``localtime``, ``alternatives``… never the
  whole ``/etc``), the tool's root (read-only unless the action writes), the program
  itself when it lives elsewhere, a private ``/tmp`` (tmpfs), its own ``/proc`` and a
  minimal ``/dev``. Nothing else of the host: not ``/root``, ``/home``, ``/work``, the
  host's ``/tmp``, ``/etc/shadow``, nor the gateway's files;
- every namespace unshared (``--unshare-all``): no network, its own PID namespace (so no
  other process, ``/proc/<gateway>/environ`` included, is visible). With ``network`` the
  network namespace is shared and ``/etc/resolv.conf``, ``hosts`` and the CA certificates
  are added: which hosts it then reaches is the tool's own policy, not enforced by the OS
  (no filtering proxy);
- no new privileges (bwrap sets ``PR_SET_NO_NEW_PRIVS``), every capability dropped,
  ``--die-with-parent``, ``--new-session``, a cleared environment (``--clearenv``; only the
  confinement's variables, bwrap adds ``PWD``);
- limits through ``prlimit`` inside the sandbox (CPU seconds, address space, file size, open
  files, no core files): never ``preexec_fn``, which is unsafe in a threaded server.

The caller starts the wrapped vector in a new session as before; killing that process group
kills bwrap, whose PID-namespace init dies with it (``--die-with-parent``), and the kernel
then kills everything in the namespace: a timeout still kills the program and its children.

Why bubblewrap. Measured here (kernel 6.18, Landlock ABI 7; ``/bin/true`` 300 times from
Python, per command): direct 0.87 ms, Landlock in a ``preexec_fn`` 2.46 ms, bwrap 6.39 ms
(7.3x direct; unprivileged as ``nobody``: 0.85 / 2.71 / 7.01 ms); under a load average of
~8 on 2 cores: 1.63 / 9.45 / 28.1 ms. ``python -m toolkeeper.bench --only sandbox``
measures the shell runner sandboxed against unsandboxed and a bare start (same loaded
machine: 1.38 ms direct, 1.86 ms unsandboxed, 23.7 ms sandboxed p50). Landlock is cheaper
but only restricts access: it cannot give a private ``/tmp`` or a PID namespace (so
``/proc/<pid>/environ`` of the gateway stays readable unless ``/proc`` is denied whole),
and its network rules (ABI 4) cover TCP only, not UDP or Unix sockets. A few milliseconds
per process is small next to a tool call; bwrap gives the whole picture above, as root and
unprivileged (user namespaces).

Where bwrap cannot run (missing, user namespaces disabled, another OS) :meth:`Sandbox.wrap`
refuses with ``sandbox_unavailable``, unless the operator set the loud opt-out
``TOOLKEEPER_UNSAFE_NO_SANDBOX=1`` in the gateway's environment (a tenant cannot reach it):
then programs run unconfined and a warning is logged at start and on every use.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolkeeper.errors import ToolDenied
from toolkeeper.model.reasons import Reason

BWRAP = "/usr/bin/bwrap"
PRLIMIT = "/usr/bin/prlimit"
UNSAFE_ENV = "TOOLKEEPER_UNSAFE_NO_SANDBOX"
"""Set to ``1`` by the operator to run tools' processes unconfined where no sandbox exists."""
HOME = "/tmp/home"
"""A private, empty home inside the sandbox's ``/tmp`` (git and others look for one)."""

log = logging.getLogger("toolkeeper.sandbox")

_SYSTEM_LINKS = ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd", "/etc/group",
        "/etc/nsswitch.conf", "/etc/alternatives", "/etc/mime.types", "/etc/magic")
_ETC_NET = ("/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf",
            "/etc/services", "/etc/protocols", "/etc/ssl", "/etc/ca-certificates")


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of the sandboxed program (``None``: the gateway's own)."""

    cpu_s: int | None = None
    memory_bytes: int | None = None
    """Address space (RLIMIT_AS)."""
    file_bytes: int | None = 1 << 30
    """Largest file it may write (RLIMIT_FSIZE)."""
    open_files: int | None = 1024


@dataclass(frozen=True, slots=True)
class Confinement:
    """What one sandboxed process sees: its root, and whether it may write it or reach the
    network. ``cwd`` defaults to ``root``; ``read_only`` are host paths made visible
    read-only at their paths (a program outside ``/usr``, an interpreter's prefix);
    ``writable_paths`` further host paths it may write (a push to a local remote)."""

    root: Path
    env: Mapping[str, str] = field(default_factory=dict)
    writable: bool = False
    network: bool = False
    cwd: Path | None = None
    read_only: tuple[Path, ...] = ()
    writable_paths: tuple[Path, ...] = ()
    limits: Limits = Limits()


def _visible(path: str) -> bool:
    return path == "/usr" or path.startswith("/usr/")


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for link in _SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return args


def _limit_args(limits: Limits) -> list[str]:
    out = ["--core=0:0"]
    if limits.cpu_s is not None:
        out.append(f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}")
    for flag, value in (("--as", limits.memory_bytes), ("--fsize", limits.file_bytes),
                        ("--nofile", limits.open_files)):
        if value is not None:
            out.append(f"{flag}={value}:{value}")
    return [PRLIMIT, *out, "--"]


def bwrap_argv(bwrap: str, argv: tuple[str, ...] | list[str], conf: Confinement) -> list[str]:
    """bwrap's argument vector running ``argv`` under ``conf`` (pure: starts nothing)."""
    out = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
           "--cap-drop", "ALL", *_system_args()]
    for path in _ETC + (_ETC_NET if conf.network else ()):
        if os.path.lexists(path):
            out += ["--ro-bind-try", path, path]
    if conf.network:
        out.append("--share-net")
    out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", HOME]
    root = str(conf.root)
    out += ["--bind" if conf.writable else "--ro-bind", root, root]
    for extra in conf.read_only:
        real = os.path.realpath(extra)
        for place in dict.fromkeys((str(extra), real)):
            if not _visible(place):
                out += ["--ro-bind", real, place]
    for writable in conf.writable_paths:
        out += ["--bind", str(writable), str(writable)]
    out += ["--chdir", str(conf.cwd or conf.root)]
    for name, value in conf.env.items():
        out += ["--setenv", name, value]
    return [*out, "--", *_limit_args(conf.limits), *argv]


@functools.cache
def probe(bwrap: str) -> str | None:
    """Why bwrap cannot sandbox here (``None``: it can). Runs it once per binary and
    process: a read-only root, no network, ``/usr/bin/true``."""
    if sys.platform != "linux":
        return f"no sandbox on {sys.platform} (bubblewrap needs Linux)"
    for binary in (bwrap, PRLIMIT):
        if not os.access(binary, os.X_OK):
            return f"{binary} is missing (install bubblewrap / util-linux)"
    argv = bwrap_argv(bwrap, ["/usr/bin/true"], Confinement(root=Path("/usr")))
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, env={}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} did not run: {exc}"
    if done.returncode != 0:
        text = done.stderr.decode(errors="replace").strip()[:300]
        return f"{bwrap} cannot create a sandbox here (user namespaces?): {text}"
    return None


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Wraps programs in bwrap, or refuses; ``unsafe_off`` (the operator's opt-out) runs
    them unconfined, with a warning each time."""

    bwrap: str = BWRAP
    unsafe_off: bool = False

    @classmethod
    def from_environment(cls) -> Sandbox:
        """The sandbox the operator's environment asks for (``TOOLKEEPER_UNSAFE_NO_SANDBOX``)."""
        sandbox = cls(bwrap=BWRAP, unsafe_off=os.environ.get(UNSAFE_ENV, "") == "1")
        if sandbox.unsafe_off:
            log.warning("%s=1: processes started by tools (shell, git, artifacts) run WITHOUT "
                        "an OS sandbox, with the gateway's user rights", UNSAFE_ENV)
        return sandbox

    def unavailable(self) -> str | None:
        """Why no sandbox can be had (probed once per process), or ``None``."""
        return probe(self.bwrap)

    def wrap(self, argv: tuple[str, ...] | list[str],
             conf: Confinement) -> tuple[list[str], dict[str, str]]:
        """(argument vector, environment) to start ``argv`` confined by ``conf``; refuses
        with ``sandbox_unavailable`` where no sandbox can be had and no opt-out is set."""
        why = self.unavailable()
        if why is None:
            return bwrap_argv(self.bwrap, argv, conf), {}
        if not self.unsafe_off:
            raise ToolDenied(Reason.SANDBOX_UNAVAILABLE, f"refusing to start "
                             f"{Path(argv[0]).name} without an OS sandbox: {why}")
        log.warning("running %s WITHOUT a sandbox (%s=1): %s", Path(argv[0]).name,
                    UNSAFE_ENV, why)
        return list(argv), dict(conf.env)


@functools.cache
def default_sandbox() -> Sandbox:
    """The process's sandbox, read from the operator's environment once."""
    return Sandbox.from_environment()
