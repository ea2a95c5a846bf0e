"""Secret canary attack suite (SPEC §8): a credential a tool resolves and then echoes in its
output, its error, an exception, and an argument the agent pasted — absent from every result,
the audit, the logs, the metrics text and every byte the database holds (the SQLite file and
its WAL; every table of PostgreSQL). Builds on the leaky tool of the pipeline suite."""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text

from tests.attacks.table import ProbeTable
from tests.pipeline.test_secrets_and_audit import SECRET, _leaky_gateway
from toolkeeper import Principal, Role
from toolkeeper.secrets.env import EnvSecretsStore

FORMS = {"plain": SECRET.encode(), "base64": base64.b64encode(SECRET.encode()),
         "utf-16": SECRET.encode("utf-16-le")}


def _database_bytes(gw: Any, db_url: str) -> bytes:
    """Every row of every table (both backends), plus the SQLite file and WAL as bytes."""
    gw.flush()
    blob = b""
    with gw.store.db.engine.connect() as conn:
        for table in inspect(conn).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{table}"')):
                blob += repr(tuple(row)).encode()
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        for part in (path, Path(f"{path}-wal"), Path(f"{path}-journal")):
            if part.exists():
                blob += part.read_bytes()
    return blob


def test_a_canary_credential_reaches_no_sink(db_url: str, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    gw = _leaky_gateway(db_url, EnvSecretsStore(
        environ={"TOOLKEEPER_SECRET_VAULT__TOKEN": SECRET}))
    approver = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))
    results = []
    try:
        for mode in ("ok", "error", "crash"):
            args = {"mode": mode, "note": f"agent pasted {SECRET} here"}
            ask = gw.call_sync("leaky", arguments=args, agent="bot")
            gw.approvals.confirm(ask.approval_id, approver)
            results += [ask, gw.call_sync("leaky", arguments=args, agent="bot",
                                          approval_id=ask.approval_id)]
        sinks = {"responses": repr([r.to_dict() for r in results]).encode(),
                 "audit (API)": repr(gw.store.audit.list("default", limit=1000)).encode(),
                 "logs": caplog.text.encode(), "metrics": gw.metrics.render(),
                 "database bytes": _database_bytes(gw, db_url)}
    finally:
        gw.close()
    table = ProbeTable(f"secret canaries ({db_url.split(':')[0]})")
    table.add("the tool did run (output masked)", "echo == ***",
              str(results[1].output and results[1].output.get("echo")),
              bool(results[1].output) and results[1].output["echo"] == "***")
    for sink, data in sinks.items():
        for form, needle in FORMS.items():
            found = needle in data
            table.add(f"{sink:<15} {form}", "absent", "FOUND" if found else "absent",
                      not found and bool(data))
    table.check()
