"""Several gateways (processes, replicas) over one database see each other's definition
changes without a restart (SPEC §12)."""

from __future__ import annotations

from tests.support.waiting import wait_until
from toolkeeper import Activation, Agent, Autonomy, Gateway, Profile, Reason, Risk, SideEffect
from toolkeeper import tool as tool_decorator
from toolkeeper.store import Store
from toolkeeper.store.migrate import current, head


@tool_decorator(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def ping(n: int) -> int:
    """Echo n."""
    return n


def test_a_profile_change_reaches_the_other_gateway(db_url: str) -> None:
    a = Gateway(Store.open(db_url))
    b = Gateway(Store.open(db_url))
    try:
        a.registry.register(ping)
        a.registry.put_profile(Profile(name="p", autonomy=Autonomy(2)))
        a.registry.put_agent(Agent(name="bot", profile="p"))
        wait_until(lambda: ("default", "bot") in b.catalog.agents,
                   what="the agent reaches the other gateway")
        assert b.call_sync("ping", arguments={"n": 1}, agent="bot").reason == \
            Reason.TOOL_NOT_ENABLED
        a.registry.put_profile(Profile(name="p", autonomy=Autonomy(2),
                                       activations=(Activation(tool="ping"),)), replace=True)
        wait_until(lambda: b.call_sync("ping", arguments={"n": 2}, agent="bot").ok,
                   what="the activation reaches the other gateway")
    finally:
        a.close()
        b.close()


def test_migrations_include_the_change_counter(db_url: str) -> None:
    Store.open(db_url).close()
    assert current(db_url) == head()
    store = Store.open(db_url)
    try:
        before = store.registry.definitions_version()
        store.registry.put_setting("x", 1)
        assert store.registry.definitions_version() == before + 1
    finally:
        store.close()


def test_a_token_revoked_elsewhere_stops_working_here(db_url: str) -> None:
    a = Gateway(Store.open(db_url))
    b = Gateway(Store.open(db_url))
    try:
        rec, token = a.store.tokens.create(tenant_id="default", role="operator")
        assert a.authenticate(token) is not None  # now cached in a
        assert b.store.tokens.revoke(rec.id)
        wait_until(lambda: a.authenticate(token) is None,
                   what="the revocation reaches the other gateway")
    finally:
        a.close()
        b.close()
