"""A tool whose provider cannot be built (its function or entry point gone, its
implementation config invalid, its upstream MCP server not configured) is refused at
publish with ``provider_unavailable``; one that slipped in (published before a restart
dropped its code) stops every call with ``provider_unavailable``, never ``tool_not_found``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeeper import (
    Activation,
    Agent,
    CallDenied,
    Gateway,
    OperationRefused,
    Profile,
    Reason,
    Risk,
    SideEffect,
    ToolStatus,
)
from toolkeeper.model.tool import ToolDefinition


def shout(text: str) -> str:
    return text.upper()


def _definition(name: str, implementation_type: str, **implementation: Any) -> ToolDefinition:
    return ToolDefinition(name=name, implementation_type=implementation_type,  # type: ignore[arg-type]
                          implementation=implementation, side_effect=SideEffect.PURE,
                          risk_default=Risk.LOW, tenant_id="default",
                          input_schema={"type": "object",
                                        "properties": {"text": {"type": "string"}}})


def _enable(gw: Gateway, *tools: str) -> None:
    gw.registry.put_profile(Profile(name="p", autonomy=3,
                                    activations=tuple(Activation(tool=t) for t in tools)))
    gw.registry.put_agent(Agent(name="bot", profile="p"))


@pytest.mark.parametrize(("kind", "implementation", "names"), [
    ("function", {"function_name": "gone"}, "'gone'"),
    ("native", {"entry_point": "tk_no_such_module:Tool"}, "tk_no_such_module"),
    ("http", {"url": "ftp://example.com/x"}, "scheme"),
    ("mcp", {"server": "ghost", "tool": "t"}, "'ghost'"),
    ("agent_call", {}, "agent_call"),
])
def test_publish_refuses_a_tool_whose_provider_cannot_be_built(
        db_url: str, kind: str, implementation: dict[str, Any], names: str) -> None:
    with Gateway.open(db_url) as gw:
        gw.registry.save(_definition("broken", kind, **implementation))
        with pytest.raises(OperationRefused) as refused:
            gw.registry.publish("broken", "default")
        assert refused.value.reason == Reason.PROVIDER_UNAVAILABLE
        assert "broken: provider unavailable" in refused.value.message
        assert names in refused.value.message
        rec = gw.store.registry.tool("broken", "default")
        assert rec is not None and rec[1].status is ToolStatus.DRAFT
        assert gw.store.registry.versions(rec[0]) == []


def test_a_function_gone_after_a_restart_stops_the_call(db_url: str) -> None:
    with Gateway.open(db_url, functions={"shout": shout}) as gw:
        gw.registry.save(_definition("shout", "function", function_name="shout"))
        gw.registry.publish("shout", "default")
        _enable(gw, "shout")
        assert gw.call_sync("shout", arguments={"text": "hi"}, agent="bot").output == "HI"
    with Gateway.open(db_url) as gw:  # restarted without the function
        res = gw.call_sync("shout", arguments={"text": "hi"}, agent="bot")
        assert (res.status.value, res.reason) == ("denied", Reason.PROVIDER_UNAVAILABLE)
        assert "'shout' is not in the function allow-list" in (res.message or "")
        with pytest.raises(CallDenied) as denied:
            gw.call_or_raise_sync("shout", arguments={"text": "hi"}, agent="bot")
        assert denied.value.reason == Reason.PROVIDER_UNAVAILABLE
        gw.flush()
        events = gw.store.audit.list("default", tool="shout", types=["policy.denied"])
        assert [e.reason for e in events] == [Reason.PROVIDER_UNAVAILABLE] * 2


def test_an_mcp_tool_whose_server_was_removed_stops_the_call(db_url: str) -> None:
    with Gateway.open(db_url) as gw:
        # as an upstream import left it before its server left the config
        planted = _definition("remote", "mcp", server="gone", tool="t").model_copy(
            update={"status": ToolStatus.PUBLISHED, "version": "1.0.0"})
        gw.store.registry.upsert_tool(planted)
        rec = gw.store.registry.tool("remote", "default")
        assert rec is not None
        gw.store.registry.add_version(rec[0], planted)
        _enable(gw, "remote")
        res = gw.call_sync("remote", arguments={"text": "x"}, agent="bot")
        assert res.reason == Reason.PROVIDER_UNAVAILABLE, res
        assert "no upstream MCP server 'gone' is configured" in (res.message or "")
        assert gw.call_sync("missing", agent="bot").reason == Reason.TOOL_NOT_FOUND


def test_a_native_tool_whose_module_disappeared_stops_the_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "tk_vanishing.py"
    module.write_text("from toolkeeper import tool\n\n"
                      "@tool(inline=True)\ndef vanish(text: str) -> str:\n"
                      "    return text\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    url = f"sqlite:///{tmp_path}/tk.db"
    with Gateway.open(url) as gw:
        gw.registry.save(_definition("vanish", "native", entry_point="tk_vanishing:vanish"))
        gw.registry.publish("vanish", "default")
        _enable(gw, "vanish")
    module.unlink()
    monkeypatch.delitem(__import__("sys").modules, "tk_vanishing", raising=False)
    with Gateway.open(url) as gw:
        res = gw.call_sync("vanish", arguments={"text": "x"}, agent="bot")
        assert res.reason == Reason.PROVIDER_UNAVAILABLE, res
        assert "tk_vanishing" in (res.message or "")
