"""reference/reasons.md: every :class:`~toolkeeper.model.reasons.Reason`, by pipeline stage,
with the HTTP statuses the REST face answers it with and its meaning.

The stage is the ``# comment`` above a member in ``model/reasons.py`` and the meaning its
docstring (read from the source: enum members keep no docstrings at run time). The statuses
come from the two tables in ``toolkeeper.api`` and from every ``ApiError(status,
Reason.X, …)``-style call in the REST face, found by walking its syntax trees.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._md import GENERATED, cell, code, table

REFUSAL_DEFAULT = 422
"""The status ``toolkeeper.api.errors.refused`` gives a reason its table does not name."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One reason code as the source declares it."""

    member: str
    code: str
    stage: str
    meaning: str


def entries() -> list[Entry]:
    """The members of ``Reason`` in source order, each with its stage and docstring."""
    from toolkeeper.model import reasons

    source = inspect.getsource(reasons)
    lines = source.splitlines()
    cls = next(n for n in ast.parse(source).body
               if isinstance(n, ast.ClassDef) and n.name == "Reason")
    out: list[Entry] = []
    body = cls.body
    for i, node in enumerate(body):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
            continue
        name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
        after = body[i + 1] if i + 1 < len(body) else None
        doc = ""
        if (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            doc = inspect.cleandoc(after.value.value)
        out.append(Entry(name, str(node.value.value), _stage(lines, node.lineno), doc))
    return out


def _stage(lines: list[str], lineno: int) -> str:
    """The nearest ``# comment`` line above line ``lineno`` (1-based) of the class."""
    for line in reversed(lines[:lineno - 1]):
        stripped = line.strip()
        if stripped.startswith("class "):
            break
        if stripped.startswith("#"):
            return stripped.lstrip("# ").strip()
    return "general"


def statuses_in_source() -> dict[str, set[int]]:
    """``{reason: {status, …}}`` from the REST face's source: every call that passes an HTTP
    error status literal and a ``Reason.X`` together (``ApiError(404, Reason.NOT_FOUND, …)``),
    and every function that writes a raw status line (``b"HTTP/1.1 431 …"``) beside a
    ``Reason.X`` (answers given before the app runs)."""
    import toolkeeper.api
    from toolkeeper.model.reasons import Reason

    found: dict[str, set[int]] = {}

    def add(names: list[str], status: int) -> None:
        for name in names:
            if name in Reason.__members__:
                found.setdefault(Reason[name].value, set()).add(status)

    for path in sorted(Path(toolkeeper.api.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                statuses = [a.value for a in node.args if isinstance(a, ast.Constant)
                            and isinstance(a.value, int) and 400 <= a.value < 600]
                if len(statuses) == 1:
                    add(_reasons_in(node.args), statuses[0])
            elif isinstance(node, ast.FunctionDef):
                inner = list(ast.walk(node))
                for c in inner:
                    line = _STATUS_LINE.match(c.value) if isinstance(c, ast.Constant) and \
                        isinstance(c.value, bytes) else None
                    if line:
                        add(_reasons_in(inner), int(line[1]))
    return found


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([45]\d\d) ")


def _reasons_in(nodes: Sequence[ast.AST]) -> list[str]:
    """The member names of every ``Reason.X`` among ``nodes``."""
    return [a.attr for a in nodes if isinstance(a, ast.Attribute)
            and isinstance(a.value, ast.Name) and a.value.id == "Reason"]


def status_tables() -> tuple[dict[str, int], dict[str, set[int]]]:
    """(statuses of a call through ``POST /tools/execute``, statuses of refusals)."""
    from toolkeeper.api.errors import STATUS_OF_REASON
    from toolkeeper.api.routes.execute import _HTTP_OF_CALL

    refusals = statuses_in_source()
    for reason, status in STATUS_OF_REASON.items():
        refusals.setdefault(str(reason), set()).add(status)
    return {str(k): v for k, v in _HTTP_OF_CALL.items()}, refusals


INTRO = """# Reason codes

Every call that is stopped or fails ends with exactly one reason code, and every refusal of
the REST API, the MCP face, the CLI and the library carries one. The codes are defined once,
in `toolkeeper.model.reasons.Reason`; this page is generated from that class.

**HTTP statuses.** A call that the pipeline stops or that fails answers
[`POST /tools/execute`](rest.md#post-tools-execute) (and `toolkeeper.client`) with **200**:
the reason is in the result's `reason` field and its `status` says what happened. The *call*
column names the reasons answered otherwise, with the error shape `{"error": {"reason",
"message", "details"}}` and the call's result in `details`. A request refused before any
call runs (a bad token, a body too large or nested too deep) and a refusal by any other
endpoint answer the error shape with the status of the *refusal* column: the statuses the
code gives that reason, or 422 when it names none.

"""


def _heading(stage: str) -> str:
    """``resolve`` -> ``Resolve``; a comment that starts with a name (``web_fetch built-in``)
    keeps it as written."""
    first = stage.split(" ", 1)[0]
    return stage[0].upper() + stage[1:] if first.isalpha() else stage


def render() -> str:
    """The page."""
    execute, refusals = status_tables()
    parts = [GENERATED, INTRO]
    stages: dict[str, list[Entry]] = {}
    for entry in entries():
        stages.setdefault(entry.stage, []).append(entry)
    for stage, members in stages.items():
        parts.append(f"## {_heading(stage)}\n\n")
        rows = []
        for e in members:
            refusal = ", ".join(str(s) for s in sorted(refusals.get(e.code, ()))) or str(
                REFUSAL_DEFAULT)
            rows.append([f'<a id="{e.code}"></a>{code(e.code)}',
                         str(execute.get(e.code, 200)), refusal, cell(e.meaning)])
        parts.append(table(["Code", "Call", "Refusal", "Meaning"], rows) + "\n")
    return "".join(parts)
