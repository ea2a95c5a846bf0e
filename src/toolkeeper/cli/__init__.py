"""The ``toolkeeper`` command line: one module per command group, over one Gateway.

Global options (``--db``, ``--tenant``) come first: ``toolkeeper --tenant acme calls list``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from toolkeeper.cli import (
    agents,
    approvals,
    audit,
    call,
    calls,
    config_cmds,
    db,
    demo,
    graph,
    mcp_cmd,
    retrieval,
    serve,
    tokens,
    tools,
)
from toolkeeper.cli._common import DEFAULT_DB, CliState

app = typer.Typer(
    name="toolkeeper",
    help="toolkeeper: the governed tool gateway for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    db_url: Annotated[str, typer.Option(
        "--db", envvar="TOOLKEEPER_DATABASE_URL", show_envvar=True,
        help="Database URL (SQLite file or postgresql+psycopg://…).")] = DEFAULT_DB,
    tenant: Annotated[str, typer.Option(
        "--tenant", envvar="TOOLKEEPER_TENANT", help="Tenant to act in.")] = "default",
) -> None:
    """toolkeeper: the governed tool gateway for AI agents."""
    source = ctx.get_parameter_source("db_url")
    explicit = source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")
    ctx.obj = CliState(db=db_url, tenant=tenant, db_explicit=explicit)


app.command("init")(config_cmds.init)
app.command("check")(config_cmds.check)
app.command("graph")(graph.graph)
app.command("apply")(config_cmds.apply)
app.command("call")(call.call)
app.command("demo")(demo.demo)
app.command("serve")(serve.serve)
app.command("mcp")(mcp_cmd.mcp)
app.add_typer(agents.app, name="agents")
app.add_typer(approvals.app, name="approvals")
app.add_typer(calls.app, name="calls")
app.add_typer(audit.app, name="audit")
app.add_typer(tools.app, name="tools")
app.add_typer(tokens.app, name="tokens")
app.add_typer(db.app, name="db")
app.add_typer(retrieval.app, name="retrieval")


def main() -> None:
    """Entry point of the ``toolkeeper`` script."""
    app()


__all__ = ["app", "main"]
