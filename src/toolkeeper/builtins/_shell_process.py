"""The process runner of the ``shell`` built-in: one program from an argument vector (never a
shell), in its own session, with a scrubbed environment, a deadline and capped output.

The program leads a new process group (``start_new_session``); when it exits, times out or
the call is cancelled, the whole group is killed, so nothing it started outlives the call —
a background child holding the output pipes open cannot stall it either.

It runs in the OS sandbox (:mod:`toolkeeper.sandbox`): only ``cwd`` of the host is visible
(writable unless the plan says otherwise), no network, a private ``/tmp``, limits. Killing
the group kills bwrap, and with it the sandbox's PID namespace (every process in it).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from toolkeeper.errors import ToolError
from toolkeeper.model.reasons import Reason
from toolkeeper.sandbox import Confinement, Limits, Sandbox, default_sandbox

_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Plan:
    """A checked command, ready to start: nothing in it came from the agent unchecked."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]
    writable: bool = True
    """Whether the program may write ``cwd`` (the sandbox binds it read-only otherwise)."""
    network: bool = False
    """Whether the program may reach the network (its sandbox shares the host's)."""


@dataclass(frozen=True, slots=True)
class Finished:
    """What the program left: its exit status and the first bytes of its output."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool


async def _read(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    """Keep up to ``cap`` bytes and drain the rest unkept (the program is never blocked on a
    full pipe, and memory stays bounded)."""
    buf = bytearray()
    seen = 0
    while chunk := await stream.read(_CHUNK):
        seen += len(chunk)
        if len(buf) < cap:
            buf += chunk[: cap - len(buf)]
    return bytes(buf), seen > cap


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Exit(asyncio.subprocess.SubprocessStreamProtocol):
    """Stream protocol that also says when the program exited: ``Process.wait`` waits for
    the pipes too, which a background child may hold open."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_CHUNK, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


_MEMORY = 8 << 30  # address space of a sandboxed command (RLIMIT_AS)


def _confined(plan: Plan, timeout_s: float,
              sandbox: Sandbox) -> tuple[list[str], dict[str, str]]:
    """The sandboxed command line; refuses with ``sandbox_unavailable`` when none exists."""
    limits = Limits(cpu_s=math.ceil(timeout_s) + 1, memory_bytes=_MEMORY)
    conf = Confinement(root=plan.cwd, env=plan.env, writable=plan.writable,
                       network=plan.network, read_only=(Path(plan.argv[0]),), limits=limits)
    return sandbox.wrap(plan.argv, conf)


async def _start(plan: Plan, timeout_s: float,
                 sandbox: Sandbox) -> tuple[asyncio.subprocess.Process, _Exit]:
    loop = asyncio.get_running_loop()
    argv, env = _confined(plan, timeout_s, sandbox)
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Exit(loop), *argv, cwd=plan.cwd, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:  # its text names the program, which the operator configured
        raise ToolError(Reason.TOOL_UNAVAILABLE, f"cannot start {plan.argv[0]}: "
                        f"{exc.strerror or type(exc).__name__}") from None
    return asyncio.subprocess.Process(transport, protocol, loop), protocol


async def run(plan: Plan, *, timeout_s: float, stdout_cap: int, stderr_cap: int,
              sandbox: Sandbox | None = None) -> Finished:
    """Run ``plan`` in ``sandbox`` (the process's own by default); ``command_timeout`` after
    ``timeout_s`` (the group killed)."""
    proc, protocol = await _start(plan, timeout_s, sandbox or default_sandbox())
    assert proc.stdout is not None and proc.stderr is not None
    out = asyncio.ensure_future(_read(proc.stdout, stdout_cap))
    err = asyncio.ensure_future(_read(proc.stderr, stderr_cap))
    try:
        await asyncio.wait_for(asyncio.shield(protocol.exited), timeout_s)
        _kill_group(proc.pid)  # strays it left behind, and the pipes they hold
        (stdout, out_cut), (stderr, err_cut) = await asyncio.gather(out, err)
        code = await proc.wait()
    except TimeoutError:
        raise ToolError(Reason.COMMAND_TIMEOUT, f"{Path(plan.argv[0]).name} did not finish "
                        f"within {timeout_s:g} s; its process group was killed") from None
    finally:
        _kill_group(proc.pid)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
        for task in (out, err):
            task.cancel()
    return Finished(code, stdout, stderr, out_cut, err_cut)
