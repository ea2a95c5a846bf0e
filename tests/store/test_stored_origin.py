"""Definitions stored before they recorded who wrote them (issue 26, item 8's family): a
tool, tool snapshot or agent endpoint whose stored JSON has no ``origin`` (or ``null``)
loads as ``api``, the least trusted writer (never the operator's platform secrets), on
every read path, the catalog's included; as stored profiles already did."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select, update

from toolkeeper import Agent, Gateway
from toolkeeper.builtins import definition
from toolkeeper.model.profile import AgentEndpoint
from toolkeeper.store import Store
from toolkeeper.store.schema import agents, tool_versions, tools

ENDPOINT = AgentEndpoint(transport="http", url="https://agent.example/run",
                         status="published")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store.open(db_url)
    yield s
    s.close()


def _rewrite(store: Store, table: Any, key: Any, column: str, change: Any) -> None:
    """Edit the stored JSON of every row of ``table`` in place (as an old release left it)."""
    with store.db.write() as conn:
        for row in conn.execute(select(key, table.c[column])).all():
            conn.execute(update(table).where(key == row[0]).values(
                {column: change(dict(row[1]))}))


def _without_origin(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "origin"}


def _null_origin(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "origin": None}


def _old_endpoint(change: Any) -> Any:
    return lambda data: {**data, "endpoint": change(data["endpoint"])}


@pytest.mark.parametrize("change", [_without_origin, _null_origin], ids=["missing", "null"])
def test_stored_tools_and_endpoints_without_origin_load_as_api(
        store: Store, change: Any) -> None:
    tool = definition("agent_call")
    tool_id = store.registry.upsert_tool(tool)
    assert store.registry.add_version(tool_id, tool)
    store.registry.upsert_agent(Agent(name="b", profile="p", endpoint=ENDPOINT))
    _rewrite(store, tools, tools.c.id, "definition", change)
    _rewrite(store, tool_versions, tool_versions.c.id, "snapshot", change)
    _rewrite(store, agents, agents.c.name, "definition", _old_endpoint(change))
    reg = store.registry
    found = reg.tool("agent_call", "default")
    assert found is not None
    loaded = [found[1], *(t for _, t in reg.tools("default")), *reg.versions(tool_id),
              *(t for t, _ in reg.version_rows(tool_id)),
              *(r.definition for r in reg.tool_rows("default"))]
    by_id = reg.tool_by_id(tool_id)
    assert by_id is not None
    loaded.append(by_id.definition)
    assert [t.origin for t in loaded] == ["api"] * 6
    assert [a.endpoint.origin for a in reg.agents() if a.endpoint] == ["api"]
    gw = Gateway(store)  # the catalog the pipeline reads
    try:
        record = gw.runtime.catalog.record("default", "agent_call")
        assert record is not None and record[1].origin == "api"
        assert [s.origin for s in record[2]] == ["api"]
        endpoint = gw.runtime.catalog.agents[("default", "b")].endpoint
        assert endpoint is not None and endpoint.origin == "api"
    finally:
        gw.close()


def test_a_recorded_origin_is_kept(store: Store) -> None:
    tool = definition("agent_call").model_copy(update={"origin": "config"})
    store.registry.upsert_tool(tool)
    store.registry.upsert_agent(Agent(name="b", profile="p", endpoint=ENDPOINT))
    assert [t.origin for _, t in store.registry.tools("default")] == ["config"]
    assert [a.endpoint.origin for a in store.registry.agents() if a.endpoint] == ["code"]
