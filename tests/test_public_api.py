"""The façade: ``toolkeeper.__all__`` names exactly the public objects, all importable."""

from __future__ import annotations

import toolkeeper


def test_all_is_complete_and_importable() -> None:
    exported = set(toolkeeper.__all__)
    # the server side's names load on first use (toolkeeper.__getattr__)
    names = {name for name in vars(toolkeeper) if not name.startswith("_")}
    public = (names - {"TYPE_CHECKING"}) | set(toolkeeper._SERVER)
    modules = {name for name in public if type(getattr(toolkeeper, name)).__name__ == "module"}
    assert exported == (public - modules) | {"__version__"}
    for name in toolkeeper.__all__:
        assert getattr(toolkeeper, name) is not None
    assert not hasattr(toolkeeper, "NoSuchName")


def test_reason_codes_are_unique_wire_strings() -> None:
    values = [r.value for r in toolkeeper.Reason]
    assert len(values) == len(set(values))
    assert all(v == v.lower() and " " not in v for v in values)


def test_event_types_match_spec_vocabulary() -> None:
    spec = [
        "call.requested",
        "call.resolved",
        "policy.denied",
        "scope.denied",
        "limit.denied",
        "budget.warning",
        "gate.allowed",
        "gate.required",
        "preview.created",
        "approval.created",
        "approval.granted",
        "approval.denied",
        "approval.consumed",
        "call.deduped",
        "call.attempted",
        "call.succeeded",
        "call.failed",
        "call.unknown",
        "call.superseded",
        "turn.decided",
        "call.resolved_manually",
        "side_effect.recorded",
        "side_effect.compensated",
        "tool.health_changed",
        "tool.quarantined",
        "tool.published",
        "config.applied",
        "token.created",  # tokens create --local (issue 15): beyond SPEC §9's list
        "audit.pruned",  # audit retention (issue 13): beyond SPEC §9's list
    ]
    assert sorted(e.value for e in toolkeeper.EventType) == sorted(spec)
