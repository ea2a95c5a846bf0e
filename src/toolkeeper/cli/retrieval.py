"""``toolkeeper retrieval …``: the tenant's retrieval pipelines (issue 10) — create, list,
show, delete; ingest files as documents (one transaction), list and delete documents;
query. Writes need an admin ``--token`` as over REST; reads work on the local store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from toolkeeper.cli._common import (
    EXIT_USAGE,
    JsonFlag,
    TokenOption,
    fail,
    gateway,
    out,
    parse_json,
    person,
    plain,
    print_json,
    state,
    table,
)
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason

app = typer.Typer(help="Retrieval pipelines: documents in, ranked chunks out.",
                  no_args_is_help=True)
Ref = Annotated[str, typer.Argument(help="The pipeline's id or name.")]


def _show(data: Any, json_out: bool, message: str) -> None:
    if json_out:
        print_json(data)
    else:
        out().print(message, highlight=False, markup=False)


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Unique in the tenant.")],
    description: Annotated[str, typer.Option("--description")] = "",
    chunk_chars: Annotated[int, typer.Option("--chunk-chars", help="100-20000.")] = 800,
    chunk_overlap: Annotated[int, typer.Option("--chunk-overlap")] = 100,
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Create a pipeline (needs an admin --token)."""
    with gateway(ctx) as gw:
        row = gw.retrieval.create(state(ctx).tenant, name, description=description,
                                  chunk_chars=chunk_chars, chunk_overlap=chunk_overlap,
                                  by=person(gw, token, Role.ADMIN))
    _show(row, json_out, f"created pipeline {row.name} ({row.id})")


@app.command("list")
def list_(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """The tenant's pipelines."""
    with gateway(ctx) as gw:
        rows = gw.retrieval.pipelines(state(ctx).tenant)
    if json_out:
        print_json(rows)
        return
    table("retrieval pipelines", ["id", "name", "documents", "chunks", "chunk chars"],
          [[r.id, r.name, r.documents, r.chunks, r.chunk_chars] for r in rows],
          empty="no pipelines")


@app.command("documents")
def documents(ctx: typer.Context, pipeline: Ref, json_out: JsonFlag = False) -> None:
    """A pipeline's documents."""
    with gateway(ctx) as gw:
        rows = gw.retrieval.documents(state(ctx).tenant, pipeline)
    if json_out:
        print_json(rows)
        return
    table("documents", ["id", "source", "chunks", "metadata"],
          [[r.id, r.source, r.chunks, r.metadata] for r in rows], empty="no documents")


@app.command("delete")
def delete(ctx: typer.Context, pipeline: Ref, token: TokenOption = None,
           json_out: JsonFlag = False) -> None:
    """Delete a pipeline with its documents (needs an admin --token)."""
    with gateway(ctx) as gw:
        gw.retrieval.delete(state(ctx).tenant, pipeline, by=person(gw, token, Role.ADMIN))
    _show({"deleted": pipeline}, json_out, f"deleted pipeline {pipeline}")


@app.command("delete-document")
def delete_document(ctx: typer.Context, pipeline: Ref,
                    document_id: Annotated[str, typer.Argument()],
                    token: TokenOption = None, json_out: JsonFlag = False) -> None:
    """Delete one document and its chunks (needs an admin --token)."""
    with gateway(ctx) as gw:
        gw.retrieval.delete_document(state(ctx).tenant, pipeline, document_id,
                                     by=person(gw, token, Role.ADMIN))
    _show({"deleted": document_id}, json_out, f"deleted document {document_id}")


@app.command("ingest")
def ingest(
    ctx: typer.Context,
    pipeline: Ref,
    files: Annotated[list[Path], typer.Argument(help="UTF-8 text files, one document each.")],
    metadata_json: Annotated[str | None, typer.Option(
        "--metadata-json", help="Metadata of every document: key -> string/number/bool.")] = None,
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Ingest files as documents (source = the path given), all or nothing (needs an
    admin --token)."""
    metadata = parse_json(metadata_json, "--metadata-json") or {}
    docs = []
    for path in files:
        try:
            docs.append({"text": path.read_text(encoding="utf-8"), "source": str(path),
                         "metadata": metadata})
        except (OSError, UnicodeDecodeError) as exc:
            fail(Reason.INVALID_ARGUMENTS, f"cannot read {str(path)!r} "
                 f"({type(exc).__name__})", EXIT_USAGE)
    with gateway(ctx) as gw:
        rows = gw.retrieval.ingest(state(ctx).tenant, pipeline, docs,
                                   by=person(gw, token, Role.ADMIN))
    _show({"documents": rows}, json_out,
          f"ingested {len(rows)} document(s), {sum(r.chunks for r in rows)} chunk(s)")


@app.command("query")
def query(
    ctx: typer.Context,
    pipeline: Ref,
    text: Annotated[str, typer.Argument(help="Plain words (never search syntax).")],
    top_k: Annotated[int | None, typer.Option("--top-k")] = None,
    filters_json: Annotated[str | None, typer.Option(
        "--filters-json", help="Metadata equality filters: key -> value.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """The chunks best matching TEXT, highest score first."""
    filters = parse_json(filters_json, "--filters-json")
    with gateway(ctx) as gw:
        found = gw.retrieval.query(state(ctx).tenant, pipeline, text, top_k=top_k,
                                   filters=filters)
    if json_out:
        print_json(plain(found))
        return
    table(f"{len(found['chunks'])} chunk(s)", ["score", "source", "text"],
          [[c["score"], c["source"], c["text"]] for c in found["chunks"]], empty="no match")
