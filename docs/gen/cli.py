"""reference/cli.md: every command of ``toolkeeper`` (the typer app in ``toolkeeper.cli``),
walked as the command tree typer builds, with its usage, help and options as ``--help``
prints them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._md import GENERATED, cell, code, table

INTRO = """# Command line

`toolkeeper` is installed with the package (in this checkout: `.venv/bin/toolkeeper`, or
`toolkeeper` once the venv is activated with `source .venv/bin/activate`). Global options
come first: `toolkeeper --tenant acme calls list`. This page is generated from the command
tree, with each command's help and options as `toolkeeper COMMAND --help` prints them.

"""


def root() -> Any:
    """The click command typer builds from ``toolkeeper.cli.app``."""
    import typer.main

    from toolkeeper.cli import app

    return typer.main.get_command(app)


def walk(command: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
    """``(command, context)`` for ``command`` and every command below it, depth first in
    the order they were added (hidden commands left out)."""
    yield command, ctx
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from walk(sub, type(ctx)(sub, info_name=name, parent=ctx))


def commands() -> list[tuple[str, Any, Any]]:
    """``(full name, command, context)`` of every command, the root first."""
    from typer._click.core import Context

    top = root()
    return [(ctx.command_path, cmd, ctx)
            for cmd, ctx in walk(top, Context(top, info_name="toolkeeper"))]


def anchor(path: str) -> str:
    """The heading id MkDocs gives ``## toolkeeper calls list``: ``toolkeeper-calls-list``."""
    return path.lower().replace(" ", "-")


def _section(path: str, command: Any, ctx: Any) -> str:
    level = "#" * min(2 + path.count(" ") - 1, 4) if " " in path else "##"
    usage = " ".join([path, *command.collect_usage_pieces(ctx)])
    parts = [f"{level} {path}\n\n", f"```\n{usage}\n```\n\n"]
    if command.help:
        parts.append(command.help.strip().replace("\b\n", "") + "\n\n")
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or param.name == "help":
            continue
        kind = "argument" if param.param_type_name == "argument" else "option"
        rows.append([code(record[0]), kind, cell(record[1])])
    parts.append(table(["Name", "Kind", "Help"], rows))
    subs = [n for n, s in getattr(command, "commands", {}).items() if not s.hidden]
    if subs:
        parts.append("\nCommands: " + ", ".join(
            f"[{code(f'{path} {n}')}](#{anchor(f'{path} {n}')})" for n in subs) + ".\n")
    return "".join(parts) + "\n"


def render() -> str:
    """The page."""
    return GENERATED + INTRO + "".join(_section(*c) for c in commands())
