"""``artifact`` provider: an operator-installed artifact (``providers.artifacts``) run in a
worker process per call, with a deadline, memory and CPU limits, a scrubbed environment
and an output cap. Arguments map to the declared inputs by name and pass as literal
values (``{{ x }}`` is a string like any other). The artifact's hash was pinned when the
tool was published; a different hash now quarantines the tool (``on_drift``) and refuses
the call with ``tool_quarantined``, like a changed upstream MCP definition.

The worker runs in the OS sandbox (:mod:`toolkeeper.sandbox`): it sees its own copy of the
artifact (read-only), the interpreter and a private ``/tmp``; no network, nothing else of
the host; where no sandbox can be had the call is refused with ``sandbox_unavailable``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolkeeper.errors import UserError
from toolkeeper.model.enums import ToolStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.artifacts import ArtifactLibrary, Manifest, Snapshot
from toolkeeper.providers.base import NoPreview, ToolContext, ToolPolicy
from toolkeeper.sandbox import Confinement, Limits, default_sandbox

WORKER = Path(__file__).with_name("artifact_worker.py")
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
"""The worker's whole environment: nothing of the gateway's (keys, tokens) reaches it."""
Drift = Callable[[ToolDefinition, str], None]


class ArtifactConfig(BaseModel):
    """``implementation`` of an ``artifact`` tool (the artifact is named by the tool's
    ``artifact_id``/``artifact_version``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    artifact_hash: str | None = None
    """Pinned when the tool is published; never written by hand."""
    memory_mb: int = Field(default=512, ge=64, le=65536)
    """Address-space limit of the worker process (RLIMIT_AS)."""
    cpu_s: int = Field(default=10, ge=1, le=3600)
    """CPU-seconds limit of the worker process (RLIMIT_CPU)."""
    max_output_bytes: int = Field(default=1_000_000, ge=1, le=100_000_000)
    """Cap on the worker's JSON answer; more is ``output_too_large``."""


class ArtifactProvider(NoPreview):
    """Runs one pinned artifact; see the module docstring."""

    policy_model = ToolPolicy

    def __init__(self, tool: ToolDefinition, library: ArtifactLibrary,
                 on_drift: Drift | None = None) -> None:
        self._tool = tool
        self._library = library
        self._on_drift = on_drift
        self._config = ArtifactConfig.model_validate(tool.implementation)
        library.snapshot(tool.artifact_id, tool.artifact_version)  # installed, or refused

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            snap = await asyncio.to_thread(self._library.snapshot, self._tool.artifact_id,
                                           self._tool.artifact_version)
        except UserError as exc:
            ctx.fail(Reason.ARTIFACT_NOT_INSTALLED, str(exc))
        self._check_pin(snap, ctx)
        inputs = _inputs(snap.manifest, arguments, ctx)
        with tempfile.TemporaryDirectory(prefix="toolkeeper-artifact-") as root:
            await asyncio.to_thread(_write, Path(root), snap)
            deadline = max(ctx.timeout_s * 0.9, ctx.timeout_s - 1.0)
            raw = await self._run(root, snap.manifest.entry, inputs, deadline, ctx)
        return _answer(raw, ctx)

    def _check_pin(self, snap: Snapshot, ctx: ToolContext) -> None:
        pinned = self._config.artifact_hash
        if pinned is None and self._tool.status is ToolStatus.DRAFT:
            return  # a draft (debug mode) runs what is installed; publishing pins it
        if pinned != snap.hash:
            if self._on_drift is not None:
                self._on_drift(self._tool, snap.hash)
            ctx.deny(Reason.TOOL_QUARANTINED, f"{self._tool.name}: artifact "
                     f"{self._tool.artifact_id} {self._tool.artifact_version} changed since "
                     "it was published; an admin must re-publish the tool",
                     pinned_hash=pinned, artifact_hash=snap.hash)

    async def _run(self, root: str, entry: str, inputs: dict[str, Any], deadline: float,
                   ctx: ToolContext) -> tuple[bytes, int]:
        cfg = self._config
        payload = json.dumps({"entry": entry, "root": root, "arguments": inputs,
                              "memory_bytes": cfg.memory_mb * 1024 * 1024,
                              "cpu_s": cfg.cpu_s}).encode()
        argv, env = _confined(root, cfg)
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=root,
            env=env, start_new_session=True)
        try:
            async with asyncio.timeout(deadline):
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(payload)
                await proc.stdin.drain()
                proc.stdin.close()
                out = await proc.stdout.read(cfg.max_output_bytes + 1)
                if len(out) > cfg.max_output_bytes:
                    ctx.fail(Reason.OUTPUT_TOO_LARGE, f"the artifact answered more than "
                             f"{cfg.max_output_bytes} bytes")
                while chunk := await proc.stdout.read(65536):
                    out += chunk
                    if len(out) > cfg.max_output_bytes:
                        ctx.fail(Reason.OUTPUT_TOO_LARGE, f"the artifact answered more "
                                 f"than {cfg.max_output_bytes} bytes")
                code = await proc.wait()
        except TimeoutError:
            ctx.fail(Reason.ARTIFACT_TIMEOUT, f"the artifact ran past {deadline:.1f}s and "
                     "was killed")
        finally:
            _kill_group(proc)  # whatever it started dies with it, on every path
            with suppress(ProcessLookupError):
                await proc.wait()
        return out, code


def _confined(root: str, cfg: ArtifactConfig) -> tuple[list[str], dict[str, str]]:
    """The worker's command line in the sandbox: the interpreter itself (not a virtual
    environment's link to it: ``-I`` needs only the standard library), read-only."""
    python = os.path.realpath(sys.executable)
    conf = Confinement(
        root=Path(root), env=ENV, read_only=(Path(sys.base_prefix), WORKER),
        limits=Limits(cpu_s=cfg.cpu_s + 1, memory_bytes=cfg.memory_mb * 1024 * 1024))
    return default_sandbox().wrap((python, "-I", "-B", str(WORKER)), conf)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _inputs(manifest: Manifest, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The arguments as the declared inputs, by name and as given (no interpolation)."""
    declared = {i.name for i in manifest.inputs}
    unknown = sorted(k for k in arguments if k not in declared)
    if unknown:
        ctx.deny(Reason.INVALID_ARGUMENTS, f"the artifact declares no input "
                 f"{', '.join(n[:64] for n in unknown[:10])}", inputs=sorted(declared))
    missing = [i.name for i in manifest.inputs if i.required and i.name not in arguments]
    if missing:
        ctx.deny(Reason.ARTIFACT_INPUT_MISSING,
                 f"required artifact input missing: {', '.join(missing)}", missing=missing)
    return {i.name: arguments[i.name] for i in manifest.inputs if i.name in arguments}


def _write(root: Path, snap: Snapshot) -> None:
    for rel, data in snap.files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _answer(raw: tuple[bytes, int], ctx: ToolContext) -> Any:
    out, code = raw
    try:
        answer = json.loads(out) if out else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        # the sandbox (bwrap) reports a program killed by signal N as exit status 128 + N
        if code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL):
            ctx.fail(Reason.ARTIFACT_TIMEOUT, "the artifact used up its CPU limit")
        ctx.fail(Reason.ARTIFACT_FAILED, f"the artifact's process ended with code {code} "
                 "and no answer")
    if answer.get("ok") is True:
        return answer.get("result")
    kind, what = answer.get("kind"), str(answer.get("type", ""))[:100]
    if kind == "memory":
        ctx.fail(Reason.ARTIFACT_MEMORY_LIMIT, "the artifact ran out of its memory limit")
    if kind == "output":
        ctx.fail(Reason.ARTIFACT_FAILED, "the artifact returned a value that is not JSON")
    ctx.fail(Reason.ARTIFACT_FAILED, f"the artifact raised {what}")
