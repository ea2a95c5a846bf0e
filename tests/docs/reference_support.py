"""The reference generators of docs/gen, loaded the way docs/hooks.py loads them (as the
package ``gen``), and what each page must list, read from the code independently of them."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from types import ModuleType
from typing import Any

from tests.support.docs import REPO

GEN = REPO / "docs" / "gen"


def load_gen() -> ModuleType:
    """``docs/gen`` as the package ``gen`` (one module object, whoever loads it first)."""
    if "gen" in sys.modules:
        return sys.modules["gen"]
    spec = importlib.util.spec_from_file_location(
        "gen", GEN / "__init__.py", submodule_search_locations=[str(GEN)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen"] = module
    spec.loader.exec_module(module)
    return module


def row_of(page: str, anchor: str) -> str | None:
    """The table row of ``page`` that carries ``<a id="anchor">``."""
    for line in page.splitlines():
        if f'<a id="{anchor}"></a>' in line:
            return line
    return None


def section(page: str, heading: str) -> str | None:
    """The text under the heading line ``heading`` up to the next heading of its level or
    higher (``None`` when the page has no such heading)."""
    lines = page.splitlines()
    for i, line in enumerate(lines):
        if line == heading or line.startswith(heading + " {#"):
            level = len(heading) - len(heading.lstrip("#"))
            end = next((j for j in range(i + 1, len(lines))
                        if re.match(rf"#{{1,{level}}} ", lines[j])), len(lines))
            return "\n".join(lines[i + 1:end])
    return None


def missing_reasons(page: str) -> list[str]:
    """Reason codes absent from reference/reasons.md, or whose row lacks a status the REST
    face gives them or a meaning."""
    from toolkeeper.api.errors import STATUS_OF_REASON
    from toolkeeper.api.routes.execute import _HTTP_OF_CALL
    from toolkeeper.model.reasons import Reason

    missing = []
    for reason in Reason:
        row = row_of(page, reason.value)
        wanted = {STATUS_OF_REASON.get(reason), _HTTP_OF_CALL.get(reason)} - {None}
        if row is None or any(f"| {s} " not in row and f", {s}" not in row
                              and f" {s}," not in row for s in wanted):
            missing.append(reason.value)
        elif row.rstrip().endswith("|  |"):  # every code says what it means (its docstring)
            missing.append(f"{reason.value}: no meaning")
    return missing


def missing_operations(page: str) -> list[str]:
    """Operations and schemas of the app's OpenAPI document absent from reference/rest.md."""
    from toolkeeper.api import ApiSettings, create_app

    doc = create_app(None, ApiSettings()).openapi()  # type: ignore[arg-type]
    missing = [f"{m.upper()} {p}" for p, item in doc["paths"].items() for m in item
               if section(page, f"### `{m.upper()} {p}`") is None]
    missing += [f"schema {name}" for name in doc["components"]["schemas"]
                if section(page, f"### {name}") is None]
    return missing


def cli_commands() -> dict[str, list[str]]:
    """Every command path of ``toolkeeper`` with its options' names, from the typer app's
    registrations (not the command tree the generator walks)."""
    import typer

    from toolkeeper.cli import app

    out: dict[str, list[str]] = {}

    def visit(t: typer.Typer, path: str) -> None:
        info = t.registered_callback
        out[path] = _options(info.callback) if info and info.callback else []
        for c in t.registered_commands:
            assert c.callback is not None
            name = c.name or c.callback.__name__.replace("_", "-")
            out[f"{path} {name}"] = _options(c.callback)
        for g in t.registered_groups:
            assert g.typer_instance is not None and g.name
            visit(g.typer_instance, f"{path} {g.name}")

    visit(app, "toolkeeper")
    return out


def _options(fn: Any) -> list[str]:
    """The first ``--name`` each ``typer.Option`` of ``fn``'s signature declares."""
    import inspect
    import typing

    names = []
    for param in inspect.signature(fn).parameters.values():
        for meta in getattr(typing.get_type_hints(fn, include_extras=True).get(param.name),
                            "__metadata__", ()):
            # typer.Option("--db", …) under Annotated keeps the first declaration as default
            declared = (getattr(meta, "default", None), *(getattr(meta, "param_decls", None) or ()))
            decls = [d for d in declared if isinstance(d, str) and d.startswith("--")]
            if type(meta).__name__ == "OptionInfo":
                names.append(decls[0] if decls else "--" + param.name.replace("_", "-"))
    return names


def missing_commands(page: str) -> list[str]:
    """Commands of ``toolkeeper``, or options of one, absent from reference/cli.md."""
    missing = []
    for path, options in cli_commands().items():
        level = "##" if path.count(" ") < 2 else "###"
        body = section(page, f"{level} {path}")
        if body is None:
            missing.append(path)
            continue
        missing += [f"{path} {o}" for o in options if f"{o} " not in body and f"{o}`" not in body]
    return missing


def missing_config_keys(page: str) -> list[str]:
    """Keys of the packaged config JSON Schema (top level and every type) absent from
    reference/config.md."""
    from importlib import resources

    schema = json.loads(resources.files("toolkeeper.config").joinpath(
        "toolkeeper.schema.json").read_text(encoding="utf-8"))
    missing = []
    sections = {"## Top-level keys": schema, **{f"### {n}": d for n, d in schema["$defs"].items()}}
    for heading, body in sections.items():
        text = section(page, heading)
        if text is None:
            missing.append(heading)
            continue
        missing += [f"{heading} {k}" for k in body.get("properties", {})
                    if f"| `{k}` |" not in text]
    return missing


def missing_metrics(page: str) -> list[str]:
    """Metric names a scrape of a new ``Metrics`` shows (``# HELP`` lines) absent from
    reference/metrics.md."""
    from prometheus_client import CollectorRegistry, generate_latest

    from toolkeeper.observability.metrics import Metrics
    from toolkeeper.services.audit_export.worker import families

    class Export:  # the audit export's families, registered by serve while sinks are set
        def collect(self) -> Any:
            return iter(families([]))

    export = CollectorRegistry()
    export.register(Export())
    text = Metrics().render().decode() + generate_latest(export).decode()
    names = re.findall(r"^# HELP (\S+) ", text, flags=re.M)
    assert names, "a scrape names no metric"
    # a histogram's HELP names its family; its samples are NAME_bucket, NAME_sum, NAME_count
    return [n for n in names if not re.search(rf"`{n}(_bucket|_sum|_count)?`", page)]


def missing_builtins(page: str) -> list[str]:
    """Built-ins, their actions and their policy keys (with their docstrings) absent from
    reference/builtins.md."""
    from toolkeeper.builtins import BUILTINS

    missing = []
    for key, cls in BUILTINS.items():
        text = section(page, f"## {key}")
        if text is None:
            missing.append(key)
            continue
        fields = list(cls.policy_model.model_fields)
        actions = list(cls.definition().actions)
        missing += [f"{key} policy {f}" for f in fields if f"| `{f}` |" not in text]
        missing += [f"{key} action {a}" for a in actions if f"| `{a}` |" not in text]
        missing += [f"{key} policy {f}: its docstring" for f, doc in field_docs(cls.policy_model)
                    if " ".join(doc.split())[:40].replace("|", "\\|") not in text]
    return missing


def field_docs(model: Any) -> list[tuple[str, str]]:
    """The attribute docstrings of ``model``'s fields and its bases', as pydantic reads them
    for ``use_attribute_docstrings`` (an oracle independent of docs/gen)."""
    from pydantic import BaseModel
    from pydantic._internal._docs_extraction import extract_docstrings_from_cls

    found: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
            found.update(extract_docstrings_from_cls(klass, use_inspect=True))
    return sorted(found.items())


CHECKS = {
    "reference/reasons.md": missing_reasons,
    "reference/rest.md": missing_operations,
    "reference/cli.md": missing_commands,
    "reference/config.md": missing_config_keys,
    "reference/metrics.md": missing_metrics,
    "reference/builtins.md": missing_builtins,
}
