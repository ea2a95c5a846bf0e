"""What every command shares: the global options, opening the gateway, authenticating a
person, exit codes, and rendering (rich tables for people, JSON for machines).

Exit codes: 0 ok, 1 refused operation or failed call, 2 usage or config error,
3 a call stopped for approval, confirmation or preview.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from toolkeeper.errors import ConfigError, OperationRefused, UserError
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.secrets.choice import secrets_choice

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_STOPPED = 0, 1, 2, 3
DEFAULT_DB = "sqlite:///./toolkeeper.db"

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")]
TokenOption = Annotated[
    str | None,
    typer.Option("--token", envvar="TOOLKEEPER_TOKEN", show_envvar=True,
                 help="Your token (approver/operator/admin)."),
]


@dataclasses.dataclass(frozen=True, slots=True)
class CliState:
    """The global options, handed to every command through ``ctx.obj``."""

    db: str
    """Database URL."""
    tenant: str
    """Tenant the command acts in."""
    db_explicit: bool = True
    """Whether ``--db``/``TOOLKEEPER_DATABASE_URL`` was given (else a config's
    ``database:`` may choose)."""


def state(ctx: typer.Context) -> CliState:
    """The global options of this invocation."""
    obj = ctx.find_root().obj
    if not isinstance(obj, CliState):
        return CliState(db=DEFAULT_DB, tenant="default")
    return obj


def out() -> Console:
    """A console on stdout (created per use: no module-level state)."""
    return Console(file=sys.stdout, soft_wrap=False)


def err() -> Console:
    """A console on stderr, for errors and progress."""
    return Console(file=sys.stderr, soft_wrap=True)


def fail(reason: Reason | str, message: str, code: int = EXIT_REFUSED) -> NoReturn:
    """Print ``error: <reason>: message`` to stderr and exit with ``code``."""
    err().print(f"[bold red]error[/]: {reason}: {message}", markup=True, highlight=False)
    raise typer.Exit(code)


@contextmanager
def refusals() -> Iterator[None]:
    """Translate toolkeeper exceptions into a message on stderr and an exit code."""
    try:
        yield
    except OperationRefused as exc:
        fail(exc.reason, exc.message, EXIT_REFUSED)
    except ConfigError as exc:
        fail(Reason.CONFIG_INVALID, "; ".join(exc.problems) if exc.path is None else str(exc),
             EXIT_USAGE)
    except UserError as exc:
        fail(Reason.CONFIG_INVALID, str(exc), EXIT_USAGE)


@contextmanager
def gateway(ctx: typer.Context, url: str | None = None, **kwargs: Any) -> Iterator[Gateway]:
    """Open the gateway on the ``--db`` store (or ``url``) and always close it, with the
    secrets backend ``serve`` would open there (:mod:`toolkeeper.secrets.choice`): so a
    call resolves tenants' credentials and an approval's webhook is signed and sent."""
    with refusals():
        if "secrets" not in kwargs:
            kwargs["secrets"], kwargs["secrets_key_file"] = secrets_choice(
                None, kwargs.get("secrets_key_file"), config=kwargs.get("config") is not None)
        gw = Gateway.open(url or state(ctx).db, **kwargs)
    keyed = gw.store.audit.keyed_now
    if keyed is not None:  # never silently: the key found here is now this store's
        err().print("note: " + keyed.keyed_note(), markup=False, highlight=False)
    with gw, refusals():
        yield gw


def person(gw: Gateway, token: str | None, *roles: Role) -> Principal:
    """The principal of ``token``; exits 1 ``unauthenticated`` / ``forbidden`` otherwise."""
    principal = gw.authenticate(token) if token else None
    if principal is None:
        fail(Reason.UNAUTHENTICATED, "pass a valid --token (or set TOOLKEEPER_TOKEN)")
    if roles and not principal.has_role(*roles):
        fail(Reason.FORBIDDEN, f"this needs the {' or '.join(r.value for r in roles)} role")
    return principal


def safe_url(url: str) -> str:
    """A database URL fit to print: the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


def parse_json(text: str | None, option: str) -> Any:
    """Parse a ``--*-json`` option; malformed JSON is a usage error (exit 2)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        fail(Reason.INVALID_ARGUMENTS, f"{option} is not valid JSON: {exc}", EXIT_USAGE)


def plain(value: Any) -> Any:
    """Records, enums and datetimes as JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    return value


def print_json(data: Any) -> None:
    """Write ``data`` as JSON on stdout, nothing else."""
    sys.stdout.write(json.dumps(plain(data), indent=2, sort_keys=True, default=str) + "\n")


def cell(value: Any, limit: int = 80) -> str:
    """One table cell: JSON for structures, ``-`` for nothing, long text shortened."""
    if value is None or value == "":
        return "-"
    value = plain(value)
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        text = ", ".join(str(v) for v in value)
    else:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]],
          *, empty: str = "nothing to show", limit: int = 80) -> None:
    """Print a rich table at the terminal's width; when stdout is not a terminal, plain
    tab-separated lines (a header, then one line per row, values never cut or wrapped);
    ``empty`` when there are no rows."""
    if not rows:
        out().print(f"[dim]{empty}[/]")
        return
    if not out().is_terminal:
        lines = [columns, *([cell(v, 10**9).replace("\t", " ").replace("\n", " ")
                             for v in row] for row in rows)]
        sys.stdout.write("".join("\t".join(line) + "\n" for line in lines))
        return
    t = Table(title=title, show_lines=False)
    for name in columns:
        t.add_column(name, overflow="fold")
    for row in rows:
        t.add_row(*(cell(v, limit) for v in row))
    out().print(t)


def fields_table(title: str, pairs: Sequence[tuple[str, Any]]) -> None:
    """Print key/value pairs as a two-column table, skipping empty values."""
    t = Table(title=title, show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    for key, value in pairs:
        if value is None or value == "" or value is False:
            continue
        t.add_row(key, cell(value, limit=2000))
    out().print(t)
