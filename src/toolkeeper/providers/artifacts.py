"""Operator-installed code artifacts: versioned, content-hashed Python callables.

An artifact is a directory under the configured artifacts directory (setting
``artifacts_dir``, config ``artifacts: {dir: …}``), or a package an installed distribution
offers in the entry point group ``toolkeeper.artifacts``, holding ``artifact.json``::

    {"id": "summarise", "version": "1.2.0", "entry": "summarise:run",
     "inputs": [{"name": "text", "type": "string", "required": true, "description": "…"}],
     "outputs": {"type": "object"}}

Its content hash is sha256 over its files (sorted relative paths and bytes), so a changed
byte anywhere changes it. Only the operator installs artifacts; tenants cannot name one.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolkeeper.errors import UserError

MANIFEST = "artifact.json"
ENTRY_POINT_GROUP = "toolkeeper.artifacts"
MAX_FILES = 2000
MAX_BYTES = 50_000_000
_ENTRY = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
_JSON_TYPES = {"string": "string", "integer": "integer", "number": "number",
               "boolean": "boolean", "object": "object", "array": "array", "any": None}


class ArtifactInput(BaseModel):
    """One declared input, passed to the callable as the keyword of its ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # the same as ^[A-Za-z_]\w{0,63}$, whose counted Unicode \w costs 30 ms to compile
    name: str = Field(pattern=r"^[A-Za-z_]\w*$", max_length=64)
    type: Literal["string", "integer", "number", "boolean", "object", "array", "any"] = "any"
    required: bool = False
    description: str = ""


class Manifest(BaseModel):
    """``artifact.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    version: str = Field(min_length=1, max_length=64)
    entry: str = Field(pattern=_ENTRY)
    """``module:function`` inside the artifact's directory."""
    inputs: tuple[ArtifactInput, ...] = ()
    outputs: dict[str, Any] | None = None
    description: str = ""

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the declared inputs (nothing undeclared is accepted)."""
        props: dict[str, Any] = {}
        for i in self.inputs:
            kind = _JSON_TYPES[i.type]
            props[i.name] = {**({"type": kind} if kind else {}),
                             **({"description": i.description} if i.description else {})}
        return {"type": "object", "properties": props, "additionalProperties": False,
                "required": [i.name for i in self.inputs if i.required]}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An artifact's files read once: what is hashed is what runs."""

    manifest: Manifest
    files: tuple[tuple[str, bytes], ...]
    hash: str


def content_hash(files: tuple[tuple[str, bytes], ...]) -> str:
    """sha256 over the sorted relative paths and bytes (lengths framed)."""
    h = hashlib.sha256()
    for rel, data in sorted(files):
        name = rel.encode()
        h.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big"))
        h.update(data)
    return "sha256:" + h.hexdigest()


def read_files(root: Path) -> tuple[tuple[str, bytes], ...]:
    """The regular files under ``root`` (symlinks are refused: the hash covers what is
    there, not what a link points to)."""
    out: list[tuple[str, bytes]] = []
    total = 0
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise UserError(f"artifact {root.name}: symlinks are not allowed")
        if not path.is_file():
            continue
        data = path.read_bytes()
        total += len(data)
        out.append((path.relative_to(root).as_posix(), data))
        if len(out) > MAX_FILES or total > MAX_BYTES:
            raise UserError(f"artifact {root.name} is too large")
    return tuple(out)


def installed() -> list[Path]:
    """The package directories installed packages offer in the entry point group
    ``toolkeeper.artifacts`` (``name = "pkg.artifacts.summarise"``: a package holding
    ``artifact.json``), found by their import specs: the artifact's own code is not run
    here (a dotted name's parent packages are imported, as any import does)."""
    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            spec = importlib.util.find_spec(ep.value.partition(":")[0])
        except (ImportError, ValueError):
            continue
        places = list(spec.submodule_search_locations or []) if spec else []
        if places and (Path(places[0]) / MANIFEST).is_file():
            out.append(Path(places[0]))
    return out


class ArtifactLibrary:
    """The artifacts of one directory and of installed packages (entry point group
    ``toolkeeper.artifacts``), found by ``(id, version)``; read on every use, so a change
    on disk is seen at once (and quarantines the tools pinned to the old hash)."""

    def __init__(self, root: str | Path | None) -> None:
        self.root = None if root is None else Path(root).resolve()

    def _manifests(self) -> list[tuple[Path, Manifest]]:
        dirs = sorted(p.parent for p in self.root.glob(f"*/{MANIFEST}")) if (
            self.root is not None and self.root.is_dir()) else []
        found = []
        for where in [*dirs, *installed()]:
            try:
                found.append((where, Manifest.model_validate_json(
                    (where / MANIFEST).read_bytes())))
            except (ValidationError, OSError):
                continue  # a broken manifest makes its artifact unavailable, nothing else
        return found

    def manifests(self) -> list[Manifest]:
        """The installed artifacts' manifests (a broken one is left out)."""
        return [manifest for _path, manifest in self._manifests()]

    def snapshot(self, artifact_id: str | None, version: str | None) -> Snapshot:
        """The artifact pinned by id and version; ``UserError`` when it is not installed."""
        if not artifact_id or not version:
            raise UserError("an artifact tool needs artifact_id and artifact_version")
        for path, manifest in self._manifests():
            if (manifest.id, manifest.version) == (artifact_id, version):
                files = read_files(path)
                return Snapshot(manifest, files, content_hash(files))
        raise UserError(f"artifact {artifact_id[:100]!r} version {version[:64]!r} is not "
                        "installed")
