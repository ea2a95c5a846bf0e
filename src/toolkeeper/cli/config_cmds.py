"""``toolkeeper init|check|apply``: bootstrap, lint and sync ``toolkeeper.yaml`` (SPEC §7)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkeeper.cli._common import (
    EXIT_REFUSED,
    JsonFlag,
    err,
    fail,
    gateway,
    out,
    print_json,
    refusals,
    safe_url,
    state,
    table,
)
from toolkeeper.cli.tokens import show_new_token
from toolkeeper.config import ApplyReport, Violation, apply_config, check_file, load_file
from toolkeeper.config.apply import ADVISORY_RULES
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason

STARTER = """\
# toolkeeper.yaml, written by `toolkeeper init`.
# Change it, then: toolkeeper check -f {name} && toolkeeper apply -f {name}
# Try it:          toolkeeper call calculate --arg expression="2*(3+4)" --agent assistant
version: 1
mode: production
# database: sqlite:///./toolkeeper.db   # --db / TOOLKEEPER_DATABASE_URL win
settings:
  approval_ttl_s: 86400
  audit_level: decisions
tools:
  - builtin: calculate          # arithmetic without eval (pure, low risk)
  - builtin: datetime_utils     # now / convert / parse / diff across time zones
profiles:
  - name: assistant
    tenant_id: {tenant}
    description: A supervised assistant with two safe tools.
    autonomy: 1                 # supervised: low risk runs, medium needs a preview
    activations:
      - tool: calculate
      - tool: datetime_utils
        actions: [now, convert, parse, diff]
agents:
  - name: assistant
    profile: assistant
    tenant_id: {tenant}
"""

ConfigPath = Annotated[Path, typer.Option("-f", "--file", help="The config file.",
                                          dir_okay=False)]


def init(
    ctx: typer.Context,
    config: Annotated[Path, typer.Option(
        "--config", help="Where to write the starter config.", dir_okay=False)] = Path(
        "toolkeeper.yaml"),
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite an existing config file.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Write a starter toolkeeper.yaml, create the store, apply it, print one admin token."""
    if config.exists() and not force:
        fail(Reason.CONFLICT, f"{config} exists; pass --force to overwrite it", EXIT_REFUSED)
    st = state(ctx)
    try:
        config.write_text(STARTER.format(name=config.name, tenant=st.tenant), encoding="utf-8")
    except OSError as exc:
        fail(Reason.CONFIG_INVALID, f"cannot write {config}: {exc.strerror or exc}")
    with gateway(ctx) as gw:
        report = apply_config(gw, load_file(config), base_dir=config.resolve().parent)
        rec, token = gw.identities.issue_token(st.tenant, Role.ADMIN, label="admin")
    if json_out:
        print_json({"config": str(config), "database": safe_url(st.db),
                    "applied": _report_dict(report), "token_id": rec.id, "token": token})
        return
    out().print(f"wrote {config}; store ready at {safe_url(st.db)}; "
                f"applied {report.changes} change(s)", highlight=False)
    show_new_token(rec, token, json_out=False)


def check(
    file: ConfigPath,
    tests_dir: Annotated[Path | None, typer.Option(
        "--tests-dir", help="Also require a test file for every native tool here.",
        file_okay=False)] = None,
    json_out: JsonFlag = False,
) -> None:
    """Check a config's wiring; print violations and exit 1 if there are any."""
    violations = check_file(file, tests_dir=tests_dir)
    if json_out:
        print_json({"ok": not violations, "violations": [_violation(v) for v in violations]})
    elif violations:
        table(f"{len(violations)} violation(s) in {file}", ["rule", "position", "path",
                                                             "message"],
              [[v.rule, _position(v), v.path, v.message] for v in violations], limit=1000)
    else:
        out().print(f"{file}: no violations", highlight=False)
    if violations:
        raise typer.Exit(EXIT_REFUSED)


def apply(
    ctx: typer.Context,
    file: ConfigPath,
    prune: Annotated[bool, typer.Option(
        "--prune", help="Delete profiles and agents the file no longer lists.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Sync tools, tenant policy, profiles and agents of a config to the store."""
    with refusals():
        config = load_file(file)
    st = state(ctx)
    url = st.db if st.db_explicit or config.database is None else config.database
    with gateway(ctx, url) as gw:
        report = apply_config(gw, config, base_dir=file.resolve().parent, prune=prune)
    for v in check_file(file):  # what apply let through, said where it will bite
        if v.rule in ADVISORY_RULES:
            err().print(f"note: [{v.rule}] {v.path}: {v.message}", markup=False,
                        highlight=False)
    if json_out:
        print_json({**_report_dict(report), "database": safe_url(url)})
        return
    out().print(f"applied {file} to the store {safe_url(url)}", highlight=False)
    rows = [[label, kind] for kind, labels in _report_dict(report).items()
            if isinstance(labels, list) for label in labels]
    table(None, ["record", "result"], rows, empty="the file defines nothing")
    out().print(f"{len(report.created)} created, {len(report.updated)} updated, "
                f"{len(report.unchanged)} unchanged, {len(report.pruned)} pruned",
                highlight=False)


def _report_dict(report: ApplyReport) -> dict[str, object]:
    return {"created": report.created, "updated": report.updated,
            "unchanged": report.unchanged, "pruned": report.pruned,
            "changes": report.changes}


def _position(v: Violation) -> str:
    where = v.file or "<config>"
    if v.line is not None:
        where += f":{v.line}" + (f":{v.column}" if v.column is not None else "")
    return where


def _violation(v: Violation) -> dict[str, object]:
    return {"rule": v.rule, "message": v.message, "path": v.path, "line": v.line,
            "column": v.column, "file": v.file}
