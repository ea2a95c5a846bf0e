"""``toolkeeper serve``: the REST API (with ``/docs`` and ``/openapi.json``) over one gateway.

Flags override ``TOOLKEEPER_*`` environment variables; everything is validated before the
store opens, and a bad value exits 2 naming the flag and the variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkeeper.cli._common import refusals, state
from toolkeeper.model.enums import Mode


def serve(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(
        "--host", help="Bind address (env TOOLKEEPER_HOST; default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", help="Port (env TOOLKEEPER_PORT; default 8700).")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="toolkeeper.yaml to sync at start (env TOOLKEEPER_CONFIG; "
        "default none).")
    ] = None,
    mode: Annotated[Mode | None, typer.Option(
        "--mode", help="production or debug (env TOOLKEEPER_MODE; default: the stored mode, else "
        "production).")] = None,
    max_body_bytes: Annotated[int | None, typer.Option(
        "--max-body-bytes", help="Request body cap in bytes (env TOOLKEEPER_MAX_BODY_BYTES; "
        "default 2000000).")] = None,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin", help="Allowed CORS origin, repeatable (env TOOLKEEPER_CORS_ORIGINS, "
        "comma-separated; default none).")] = None,
    system_tenant: Annotated[str | None, typer.Option(
        "--system-tenant", help="Tenant whose admins manage /tenants "
        "(env TOOLKEEPER_SYSTEM_TENANT; default system).")] = None,
    log_level: Annotated[str | None, typer.Option(
        "--log-level", help="critical, error, warning, info or debug (env TOOLKEEPER_LOG_LEVEL; "
        "default info).")] = None,
    log_format: Annotated[str | None, typer.Option(
        "--log-format", help="text or json (JSON lines on stderr) "
        "(env TOOLKEEPER_LOG_FORMAT; default text).")] = None,
    demo: Annotated[bool, typer.Option(
        "--demo", help="Load the packaged demo config and print demo tokens once.")] = False,
    workers: Annotated[int | None, typer.Option(
        "--workers", help="Server processes on the port, e.g. one per core "
        "(env TOOLKEEPER_WORKERS; default 1).")] = None,
    secrets: Annotated[str | None, typer.Option(
        "--secrets-backend", help="Secrets backend, env, embedded or vault (overrides the config "
        "file's; vault takes its settings from the file's secrets.vault, else VAULT_ADDR) "
        "(env TOOLKEEPER_SECRETS_BACKEND; --demo: embedded).")] = None,
    secrets_key_file: Annotated[Path | None, typer.Option(
        "--secrets-key-file", help="Master key file of the embedded backend "
        "(env TOOLKEEPER_SECRETS_KEY_FILE; TOOLKEEPER_SECRETS_KEY wins).")] = None,
    audit_key_file: Annotated[Path | None, typer.Option(
        "--audit-key-file", help="Audit chain key file (env TOOLKEEPER_AUDIT_KEY_FILE; "
        "TOOLKEEPER_AUDIT_KEY wins; default: derived from the secrets master key, else the "
        "key made on first start, <sqlite file>.audit-key).")] = None,
    audit_checkpoints: Annotated[Path | None, typer.Option(
        "--audit-checkpoints", help="Signed audit checkpoint file (env "
        "TOOLKEEPER_AUDIT_CHECKPOINTS; default <sqlite file>.audit-checkpoints when keyed).")
    ] = None,
) -> None:
    """Serve the REST API; on a store without admin token, create one and print it once."""
    from toolkeeper.server import ServerSettings, run

    st = state(ctx)
    with refusals():
        settings = ServerSettings.load(
            host=host, port=port, config=config, mode=mode, max_body_bytes=max_body_bytes,
            cors_origins=tuple(cors_origin) if cors_origin else None,
            system_tenant=system_tenant, log_level=log_level, log_format=log_format,
            demo=demo or None,
            workers=workers, secrets_backend=secrets, secrets_key_file=secrets_key_file,
            audit_key_file=audit_key_file, audit_checkpoints=audit_checkpoints,
            database_url=st.db if st.db_explicit else None, tenant=st.tenant)
        run(settings)
