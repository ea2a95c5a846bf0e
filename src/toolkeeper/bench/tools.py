"""The tools under measurement and the gateway set-up they run in.

Module-level so worker processes (spawn) load them by entry point, as any deployment would.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import Autonomy, Risk, SideEffect
from toolkeeper.model.profile import Activation, Agent, Profile
from toolkeeper.providers.native import tool

AGENT = "bench"
PROFILE = "bench"


# ``tool`` is annotated ``-> Any`` (it returns a BaseTool class), hence the ignores.
@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)  # type: ignore[untyped-decorator]
def add(a: int, b: int) -> int:
    """Add two integers (the trivial pure tool of SPEC §10)."""
    return a + b


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)  # type: ignore[untyped-decorator]
async def record(n: int) -> dict[str, Any]:
    """Pretend to do something that cannot be undone (durable outcome per call)."""
    return {"n": n, "done": True}


def sqlite_url(directory: str) -> str:
    return f"sqlite:///{directory}/bench.db"


@contextmanager
def fresh_pg_database(server_url: str) -> Iterator[str]:
    """The URL of a new, empty database on the PostgreSQL server of ``server_url``,
    dropped on exit (the bench counts every outcome row it finds)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    name = f"toolkeeper_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def open_gateway(url: str, **settings: Any) -> Gateway:
    """A default gateway (audit on) with both tools published, and one autonomy-2 agent."""
    gw = Gateway.open(url, **settings)
    try:
        for obj in (add, record):
            gw.registry.register(obj)
        gw.registry.put_profile(Profile(
            name=PROFILE, autonomy=Autonomy.GUARDED,
            activations=(Activation(tool="add"), Activation(tool="record")),
        ))
        gw.registry.put_agent(Agent(name=AGENT, profile=PROFILE))
    except BaseException:
        gw.close()
        raise
    return gw
