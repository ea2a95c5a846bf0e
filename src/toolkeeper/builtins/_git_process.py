"""The git process runner of the ``git`` built-in: argument vector only (never a shell), no
prompts, no repo-configured helper programs, bounded time and output.

Every git the gateway runs gets ``HARDENING`` and ``git_env``: no hooks (``core.hooksPath``
is ``/dev/null``), no fsmonitor, pager, editor, askpass, credential helper, ssh command,
signing program or auto-gc from any config; ``ext::`` and ``git://`` transports refused; no
system or global config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``,
``XDG_CONFIG_HOME`` pointing nowhere, ``HOME`` the sandbox's empty one); nothing inherited
from the gateway's environment (``PATH`` is fixed). Aliases are never used: the tool runs
fixed subcommands only.

The repository's own config is the one config left (git needs it), so ``RepoConfig`` reads
its key names before each session (listing config runs nothing) and neutralises on the
command line each key naming a program that ``HARDENING`` does not already cover (filter
drivers from ``.gitattributes``, diff drivers; ``push`` names ``--receive-pack`` itself,
one running no hooks for a local remote);
a config that includes other files (``include.path``, ``includeIf``) is refused, as those
could change between that check and the run. ``.git/`` itself is closed to the
``filesystem`` tool, so an agent cannot plant such keys; a repository that already has
them is what this covers.

Every git runs in the OS sandbox (:mod:`toolkeeper.sandbox`): the repository root is the
only host directory it sees, read-only unless the runner is ``writable`` (the write
actions), with a private empty ``HOME``; only ``push`` reaches the network, and only a push
sees a local remote's directory (writable) and the gateway user's ``~/.ssh`` (read-only).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import math
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toolkeeper.errors import ToolError
from toolkeeper.model.reasons import Reason
from toolkeeper.sandbox import HOME, Confinement, Limits, default_sandbox

INTERNAL_CAP = 4_000_000  # bytes read from git for output the tool parses itself
STDERR_CAP = 16_000
GIT = "/usr/bin/git"
"""The git every runner starts (by path: the sandbox's PATH is fixed)."""
_MEMORY = 8 << 30  # address space of one git (RLIMIT_AS)
_KEPT = ("LANG", "LC_ALL", "TZ")  # of the runner's environment, besides its own GIT_*
NOWHERE = "/nonexistent/toolkeeper-git-home"
"""``HOME`` and ``XDG_CONFIG_HOME`` of every git: no user config, no credentials file."""
HARDENING: tuple[str, ...] = (
    "--no-pager", "--literal-pathspecs",
    "-c", "core.hooksPath=/dev/null",  # no hook runs, whatever .git/hooks holds
    "-c", "core.fsmonitor=false",  # would run a program named in config on `status`
    "-c", "core.pager=cat", "-c", "core.editor=:", "-c", "sequence.editor=:",
    "-c", "core.sshCommand=ssh -o BatchMode=yes", "-c", "core.askPass=",
    "-c", "credential.helper=",  # the empty value clears every helper listed before it
    "-c", "protocol.ext.allow=never", "-c", "protocol.git.allow=never",
    "-c", "diff.external=", "-c", "log.showSignature=false",
    "-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false",
    "-c", "gc.auto=0", "-c", "maintenance.auto=false",  # no background git left behind
)
"""Options before every git subcommand (command-line config outranks every config file)."""
_NEUTRAL = (  # repo-config keys naming a program -> the value that runs none
    (re.compile(r"filter\..+\.(?:clean|smudge|process)"), ""),
    (re.compile(r"filter\..+\.required"), "false"),  # else the emptied driver "fails"
    (re.compile(r"diff\..+\.(?:command|textconv)"), ""),
)  # remote.*.receivepack: the first value wins there, so push names it (git.py)
_INCLUDES = re.compile(r"include\.path|includeif\..+\.path")


def git_env() -> dict[str, str]:
    """The whole environment of a git process: nothing inherited (the git program itself is
    found on the gateway's ``PATH``, the operator's)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "LANG": "C",
        "HOME": NOWHERE, "XDG_CONFIG_HOME": NOWHERE,
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "GIT_PAGER": "cat", "PAGER": "cat",
        "GIT_EDITOR": ":", "GIT_SEQUENCE_EDITOR": ":", "GIT_OPTIONAL_LOCKS": "0",
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes", "GIT_NO_REPLACE_OBJECTS": "1",
        **{k: v for k, v in os.environ.items() if k in _IDENTITY_VARS},  # plain names
    }


_IDENTITY_VARS = frozenset({"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                            "GIT_COMMITTER_EMAIL"})


@functools.cache
def operator_identity() -> tuple[tuple[str, str], ...]:
    """``user.name`` and ``user.email`` from the operator's own global git config (read
    once, runs nothing): the commits' identity where the repository sets none, as before
    global config was shut out."""
    found = []
    for key in ("user.name", "user.email"):
        try:
            out = subprocess.run(  # a fixed argument vector; reads config only
                [GIT, "config", "--global", "--get", key],
                capture_output=True, text=True, timeout=10, check=False,
                stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            continue
        value = out.stdout.strip()
        if out.returncode == 0 and value and "\n" not in value:
            found.append((key, value))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class RepoConfig:
    """What the repository's own config asks of the runner: overrides, or a refusal."""

    overrides: tuple[str, ...] = ()
    refusal: str | None = None

    @classmethod
    def of(cls, listing: str) -> RepoConfig:
        """From ``git config --list --show-scope --name-only -z`` (scope, key, scope, key…)."""
        items = listing.split("\0")
        overrides: list[str] = []
        for scope, key in zip(items[0::2], items[1::2], strict=False):
            name = key.lower()
            if scope == "command":
                continue
            if _INCLUDES.fullmatch(name):
                return cls(refusal=f"the repository's config includes other files ({key})")
            for pattern, value in _NEUTRAL:
                if pattern.fullmatch(name) and f"{key}={value}" not in overrides:
                    overrides.append(f"{key}={value}")
        return cls(tuple(arg for o in overrides for arg in ("-c", o)))


@dataclass(frozen=True, slots=True)
class GitOutput:
    code: int
    text: str
    err: str
    truncated: bool


async def _read(
    stream: asyncio.StreamReader, cap: int, proc: asyncio.subprocess.Process | None = None
) -> tuple[bytes, bool]:
    """Read up to ``cap`` bytes; beyond it, kill ``proc`` (stdout) or drain and discard."""
    buf = bytearray()
    while chunk := await stream.read(65536):
        if len(buf) <= cap:
            buf += chunk
        if len(buf) > cap and proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return bytes(buf[:cap]), True
    return bytes(buf[:cap]), len(buf) > cap


async def _settle(proc: asyncio.subprocess.Process) -> None:
    """The pipes of a git killed early (timed out, or over its output cap): read to their
    end, bounded (the sandbox's processes die with bwrap an instant later), then closed
    now, on this loop, not by the collector after the loop has gone ("Event loop is
    closed"), as they would be on a loaded machine."""
    assert proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(_read(proc.stdout, 0), _read(proc.stderr, 0)), 5)
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


class GitRunner:
    """Runs git in one repository: argument vector only, no prompts, bounded time and output."""

    def __init__(self, root: Path, timeout_s: float, *, writable: bool = False) -> None:
        self.root = root
        self.writable = writable
        """Whether git may write the repository (its sandbox binds it read-only otherwise)."""
        self.timeout_s = timeout_s
        # Nothing inherited: GIT_DIR, GIT_CONFIG_*, HOME… would change what git runs.
        self.env = git_env()
        self.repo_config = RepoConfig()

    async def vet_config(self) -> RepoConfig:
        """Read the repository's config key names (runs nothing) and keep the overrides
        they need for every later run; the caller refuses when ``refusal`` is set."""
        out = await self.run("config", "--list", "--show-scope", "--name-only", "-z",
                             check=False)
        config = RepoConfig.of(out.text) if out.code == 0 else RepoConfig()
        keys = {k.lower() for k in out.text.split("\0")[1::2]} if out.code == 0 else set()
        missing = [f"{k}={v}" for k, v in await asyncio.to_thread(operator_identity)
                   if k not in keys]
        self.repo_config = dataclasses.replace(
            config, overrides=(*config.overrides, *(a for m in missing for a in ("-c", m))))
        return self.repo_config

    def _sandboxed(self, argv: tuple[str, ...], push: bool,
                   remote: Path | None) -> tuple[list[str], dict[str, str]]:
        """``argv`` wrapped in the sandbox (``sandbox_unavailable`` when none exists)."""
        env = {k: v for k, v in self.env.items() if k.startswith("GIT_") or k in _KEPT}
        env.update(PATH="/usr/bin:/bin", HOME=HOME)
        ssh = Path.home() / ".ssh"
        net = push and remote is None  # a push to a local directory needs no network
        conf = Confinement(
            root=self.root, env=env, writable=self.writable or push, network=net,
            read_only=(Path(GIT), *((ssh,) if net and ssh.is_dir() else ())),
            writable_paths=(remote,) if push and remote is not None else (),
            limits=Limits(cpu_s=math.ceil(self.timeout_s) + 1, memory_bytes=_MEMORY))
        return default_sandbox().wrap((GIT, *argv[1:]), conf)

    async def run(self, *args: str, cap: int = INTERNAL_CAP, check: bool = True,
                  remote: Path | None = None) -> GitOutput:
        """Run git ``args``; ``remote``: a push's local remote directory, made visible."""
        argv, env = self._sandboxed(
            (GIT, *HARDENING, *self.repo_config.overrides, "-C", str(self.root), *args),
            args[0] == "push", remote)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(Reason.TOOL_UNAVAILABLE, f"cannot run git: {exc}") from exc
        assert proc.stdout is not None and proc.stderr is not None
        try:
            (out, truncated), (err, _) = await asyncio.wait_for(
                asyncio.gather(_read(proc.stdout, cap, proc), _read(proc.stderr, STDERR_CAP)),
                self.timeout_s,
            )
            code = await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            await _settle(proc)
            raise ToolError(Reason.TIMEOUT, f"git {args[0]} timed out") from None
        if truncated:  # killed for its output's size, its stdout left unread
            await _settle(proc)
        result = GitOutput(code, out.decode(errors="replace"), err.decode(errors="replace"),
                           truncated)
        if check and code != 0 and not truncated:
            detail = result.err.strip()[:500] or f"exit status {code}"
            raise ToolError(Reason.TOOL_ERROR, f"git {args[0]} failed: {detail}")
        return result

    async def current_branch(self) -> str | None:
        out = await self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        name = out.text.strip()
        return name if out.code == 0 and name else None

    async def ref_exists(self, ref: str) -> bool:
        out = await self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return out.code == 0

    async def is_dirty(self) -> bool:
        out = await self.run("status", "--porcelain", "-z", "--untracked-files=no")
        return bool(out.text.strip("\0"))

    async def names(self, *args: str) -> list[str]:
        out = await self.run(*args)
        return [name for name in out.text.split("\0") if name]
