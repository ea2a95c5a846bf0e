"""The ``retrieval:`` section applied: pipelines created when absent, documents ingested
when their (source, text) is not there yet. Document files are read before anything is
written, so a missing file refuses the whole apply."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkeeper.config.model import ConfigFile, render_path
from toolkeeper.errors import ConfigError, OperationRefused
from toolkeeper.services.retrieval import RetrievalService, content_digest

Documents = dict[tuple[int, int], dict[str, Any]]
"""(pipeline index, document index) -> ``{text, source, metadata}``."""


def read_documents(config: ConfigFile, base_dir: Path) -> Documents:
    """Every document of the section with its text (files read now, relative to the file)."""
    out: Documents = {}
    for p, pipeline in enumerate(config.retrieval.pipelines):
        for d, doc in enumerate(pipeline.documents):
            text = doc.text
            if doc.file is not None:
                path = ("retrieval", "pipelines", p, "documents", d, "file")
                try:
                    text = (base_dir / doc.file).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    pos = config.position(path)
                    raise ConfigError(f"{render_path(path)}: cannot read {doc.file!r} "
                                      f"({type(exc).__name__})", path=config.source,
                                      line=pos[0] if pos else None,
                                      column=pos[1] if pos else None) from None
            out[p, d] = {"text": text, "source": doc.source or doc.file or "",
                         "metadata": dict(doc.metadata)}
    return out


def sync_pipelines(service: RetrievalService, config: ConfigFile,
                   documents: Documents) -> Iterator[tuple[str, str]]:
    """Create missing pipelines and ingest new documents; yields ``(op, label)``."""
    for p, pipeline in enumerate(config.retrieval.pipelines):
        label = f"retrieval:{pipeline.tenant}/{pipeline.name}"
        try:
            existed = True
            try:
                found = service.get(pipeline.tenant, pipeline.name)
            except OperationRefused:
                existed = False
                found = service.create(pipeline.tenant, pipeline.name,
                                       description=pipeline.description,
                                       chunk_chars=pipeline.chunk_chars,
                                       chunk_overlap=pipeline.chunk_overlap)
            have = {(d.source, d.content_hash) for d in service.documents(pipeline.tenant,
                                                                           found.id)}
            new = [doc for (pi, _d), doc in sorted(documents.items()) if pi == p and (
                doc["source"], content_digest(doc["text"])) not in have]
            if new:
                service.ingest(pipeline.tenant, found.id, new)
        except OperationRefused as exc:
            where = ("retrieval", "pipelines", p)
            pos = config.position(where)
            raise ConfigError(f"{render_path(where)}: {exc.message} ({exc.reason})",
                              path=config.source, line=pos[0] if pos else None,
                              column=pos[1] if pos else None) from exc
        yield ("keep" if existed and not new else "create" if not existed else "update"), label

