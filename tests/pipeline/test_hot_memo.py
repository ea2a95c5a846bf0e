"""What the pure call's hot path remembers per profile snapshot (``CompiledProfile.memo``:
what a tool resolves to, each tool's limit and budget layers, its gates) is keyed by
everything it depends on: the tenant, the tool and the requested action, the snapshot, the
risk. Each test fails when one part of a key is dropped. SQLite and PostgreSQL."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from tests.pipeline.gw_helpers import update_profile
from tests.pipeline.sample_tools import add, slow_pure
from toolkeeper import Activation, Gateway, Limits, Reason, ToolStatus
from toolkeeper.model.call import CallRequest, CallResult
from toolkeeper.model.profile import Budget, RateLimit
from toolkeeper.pipeline.ids import new_call_id
from toolkeeper.pipeline.profiles import CompiledProfile
from toolkeeper.pipeline.resolve import resolve
from toolkeeper.pipeline.state import CallState


def _resolve(gw: Gateway, profile: CompiledProfile, tenant: str,
             tool: str = "add") -> CallResult | None:
    """The resolve step alone, for ``tenant`` with ``profile`` (as a call that read it)."""
    st = CallState(call_id=new_call_id(), request=CallRequest(tool=tool, arguments={}),
                   tenant_id=tenant, profile=profile)
    return resolve(gw._rt, st)


def _add(gw: Gateway, b: int = 1) -> Any:
    return gw.call_sync("add", arguments={"a": 1, "b": b}, agent="bot")


def _slow(gw: Gateway) -> Any:
    return gw.call_sync("slow_pure", arguments={"seconds": 0}, agent="bot")


def test_a_remembered_resolution_belongs_to_its_tenant(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    gw.registry.register(add, tenant_id="acme", publish=False)  # acme's own draft "add"
    profile = gw.catalog.profiles[("default", "p")]
    assert _resolve(gw, profile, "default") is None  # the global add, remembered
    refused = _resolve(gw, profile, "acme")  # acme's own add wins, and is a draft
    assert refused is not None and refused.reason == Reason.TOOL_NOT_PUBLISHED


def test_a_remembered_resolution_ends_with_its_snapshot(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    before = gw.catalog.profiles[("default", "p")]
    assert _resolve(gw, before, "default") is None
    gw.registry.set_status("add", None, ToolStatus.DISABLED)  # a new snapshot
    # a call that read its profile just before the reload resolves against the new snapshot
    refused = _resolve(gw, before, "default")
    assert refused is not None and refused.reason == Reason.TOOL_DISABLED
    assert _add(gw).reason == Reason.TOOL_DISABLED


def test_a_replaced_snapshot_is_freed_at_once(make_gateway: Any) -> None:
    """What a profile remembers holds no reference back to its snapshot: the snapshot a
    reload replaced is freed by reference counting, not at the next full collection."""
    gw = make_gateway(tools=[add])
    assert _add(gw).ok  # remembered in the profile's memo
    old = weakref.ref(gw.catalog)
    gc.collect()
    gc.disable()
    try:
        gw.registry.set_status("add", None, ToolStatus.DISABLED)  # a new snapshot
        assert gw.catalog is not old()
        assert old() is None
    finally:
        gc.enable()


def test_names_that_resolve_to_nothing_are_not_remembered(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    assert _add(gw).ok
    profile = gw.catalog.profiles[("default", "p")]
    remembered = len(profile.memo)
    for i in range(50):
        res = gw.call_sync(f"no-such-tool-{i}", arguments={}, agent="bot")
        assert res.reason == Reason.TOOL_NOT_FOUND
    assert len(profile.memo) == remembered


def test_an_activations_rate_limit_stays_with_its_tool(make_gateway: Any) -> None:
    once = Limits(rate=(RateLimit(limit=1, window_s=3600),))
    gw = make_gateway(tools=[add, slow_pure], activations=(
        Activation(tool="add", limits=once), Activation(tool="slow_pure")))
    assert _slow(gw).ok and _slow(gw).ok  # the unlimited tool's layers, remembered first
    assert _add(gw).ok
    assert _add(gw, 2).reason == Reason.RATE_LIMITED  # add's own layer, not slow_pure's
    assert _slow(gw).ok  # nor the other way round


def test_an_activations_budget_stays_with_its_tool(make_gateway: Any) -> None:
    once = Limits(budgets=(Budget(name="one", max_calls=1),))
    gw = make_gateway(tools=[add, slow_pure], activations=(
        Activation(tool="add", limits=once), Activation(tool="slow_pure")))
    assert _slow(gw).ok and _slow(gw).ok
    assert _add(gw).ok
    assert _add(gw, 2).reason == Reason.BUDGET_EXCEEDED
    assert _slow(gw).ok


def test_a_profiles_payload_cap_applies_below_the_deployments(make_gateway: Any) -> None:
    """The smallest payload cap of the deployment and the profile's layers, remembered
    per profile: the profile's own cap refuses what the deployment's would let through."""
    gw = make_gateway(tools=[add], max_payload_bytes=10_000)
    assert _add(gw).ok
    update_profile(gw, limits=Limits(max_payload_bytes=40))
    assert _add(gw).ok  # {"a":1,"b":1}
    big = gw.call_sync("add", arguments={"a": 1, "b": 1, "pad": "x" * 64}, agent="bot")
    assert big.reason == Reason.PAYLOAD_TOO_LARGE
    assert big.details == {"size": 86, "limit": 40}
