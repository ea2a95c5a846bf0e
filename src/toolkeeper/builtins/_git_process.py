"""The git process runner of the ``git`` built-in: argument vector only (never a shell), no
prompts, no repo-configured helper programs, bounded time and output.

Every git runs in the OS sandbox (:mod:`toolkeeper.sandbox`): the repository root is the
only host directory it sees, read-only unless the runner is ``writable`` (the write
actions), with a private empty ``HOME``; only ``push`` reaches the network, and only a push
sees a local remote's directory (writable) and the gateway user's ``~/.ssh`` (read-only)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
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


class GitRunner:
    """Runs git in one repository: argument vector only, no prompts, bounded time and output."""

    def __init__(self, root: Path, timeout_s: float, *, writable: bool = False) -> None:
        self.root = root
        self.writable = writable
        """Whether git may write the repository (its sandbox binds it read-only otherwise)."""
        self.timeout_s = timeout_s
        # Inherited GIT_* variables (GIT_DIR, GIT_WORK_TREE…) could redirect git elsewhere.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env.update(
            GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", LC_ALL="C", GIT_OPTIONAL_LOCKS="0",
            GIT_SSH_COMMAND="ssh -o BatchMode=yes",
        )

    def _sandboxed(self, argv: tuple[str, ...], push: bool,
                   remote: Path | None) -> tuple[list[str], dict[str, str]]:
        """``argv`` wrapped in the sandbox (``sandbox_unavailable`` when none exists)."""
        env = {k: v for k, v in self.env.items() if k.startswith("GIT_") or k in _KEPT}
        env.update(PATH="/usr/bin:/bin", HOME=HOME)
        ssh = Path.home() / ".ssh"
        conf = Confinement(
            root=self.root, env=env, writable=self.writable or push, network=push,
            read_only=(Path(GIT), *((ssh,) if push and ssh.is_dir() else ())),
            writable_paths=(remote,) if push and remote is not None else (),
            limits=Limits(cpu_s=math.ceil(self.timeout_s) + 1, memory_bytes=_MEMORY))
        return default_sandbox().wrap((GIT, *argv[1:]), conf)

    async def run(self, *args: str, cap: int = INTERNAL_CAP, check: bool = True,
                  remote: Path | None = None) -> GitOutput:
        """Run git ``args``; ``remote``: a push's local remote directory, made visible."""
        argv, env = self._sandboxed((
            # core.fsmonitor would run a program named in the repo's config on `status`.
            "git", "--no-pager", "--literal-pathspecs", "-c", "core.fsmonitor=false",
            "-C", str(self.root), *args), args[0] == "push", remote)
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
            # the sandbox's processes die with bwrap an instant later, closing the pipes
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(_read(proc.stdout, 0), _read(proc.stderr, 0)), 5)
            raise ToolError(Reason.TIMEOUT, f"git {args[0]} timed out") from None
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
