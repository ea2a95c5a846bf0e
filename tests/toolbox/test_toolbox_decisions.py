"""Supersede decisions (seed 004 §6, §10; issue 31 part 2): before an irreversible call with
user messages pending, the runtime's decision function is asked; the decision is recorded in
the audit; the turn group (and so the keys) follow it. Each path is shown by a scripted
runtime: ``supersede`` stops the call, ``absorb`` takes the messages in and a re-run dedupes,
``force_complete`` goes on, ``queue`` goes on in a new turn group so the call runs again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.pipeline.sample_tools import add, charge
from tests.toolbox.conftest import gateway_of
from toolkeeper import CallStatus, OperationRefused, Reason
from toolkeeper.model.events import EventType
from toolkeeper.model.turns import SupersedeAction
from toolkeeper.toolbox import PlannedCall, Toolbox

A = {"invoice": "a", "amount": 1}


class Inbox:
    """A scripted runtime: user messages that arrive, and the decision it takes."""

    def __init__(self, decision: SupersedeAction, pending: int = 1) -> None:
        self.decision = decision
        self.waiting = pending
        self.absorbed = 0
        self.asked: list[PlannedCall] = []

    def has_pending(self) -> bool:
        return self.waiting > 0

    async def decide(self, planned: PlannedCall) -> SupersedeAction:
        self.asked.append(planned)
        return self.decision

    def absorb(self) -> None:
        self.absorbed += self.waiting
        self.waiting = 0

    def count(self) -> int:
        return self.waiting


def _guard(box: Toolbox, inbox: Inbox, turn: str) -> Any:
    return box.guard(has_pending=inbox.has_pending, decide=inbox.decide, absorb=inbox.absorb,
                     pending_count=inbox.count, turn_group_id=turn)


def _decisions(box: Toolbox) -> list[dict[str, Any]]:
    page = gateway_of(box).store.audit.list("default", types=[EventType.TURN_DECIDED.value])
    return [{"agent": e.agent_id, "tool": e.tool, **e.data} for e in page]


async def test_supersede_stops_the_call_and_the_turns_later_irreversible_calls(
        make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge, add])
    inbox = Inbox(SupersedeAction.SUPERSEDE)
    guard = _guard(box, inbox, "turn-s")
    pure = await guard.execute("add", {"a": 1, "b": 2})  # not irreversible: not asked
    stopped = await guard.execute("charge", A)
    later = await guard.execute("charge", {"invoice": "b", "amount": 1})
    assert pure.ok and [p.tool for p in inbox.asked] == ["charge"]
    assert (stopped.status, stopped.reason) == (CallStatus.SUPERSEDED, Reason.SUPERSEDED)
    assert later.reason == Reason.SUPERSEDED and ledger["payments"] == []
    assert guard.superseded and [d.decision for d in guard.decisions] == ["supersede"]
    assert _decisions(box) == [{"agent": "bot", "tool": "charge", "decision": "supersede",
                                "turn_group_id": "turn-s", "pending": 1}]


async def test_absorb_goes_on_in_the_same_turn_group_so_a_rerun_dedupes(
        make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    first = await box.execute("charge", A, turn_group_id="turn-a")  # before the message
    inbox = Inbox(SupersedeAction.ABSORB, pending=2)
    guard = _guard(box, inbox, "turn-a")
    again = await guard.execute("charge", A)  # the regenerated answer plans it again
    assert inbox.absorbed == 2 and guard.turn_group_id == "turn-a"
    assert first.ok and again.ok and again.deduped and again.call_id == first.call_id
    assert ledger["payments"] == ["a"]
    assert _decisions(box)[0]["decision"] == "absorb"
    assert "continued_as" not in _decisions(box)[0]


async def test_force_complete_goes_on_as_planned(make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    inbox = Inbox(SupersedeAction.FORCE_COMPLETE)
    guard = _guard(box, inbox, "turn-f")
    one = await guard.execute("charge", A)
    two = await guard.execute("charge", A)  # still pending: asked again, same turn group
    assert one.ok and two.deduped and ledger["payments"] == ["a"]
    assert inbox.waiting == 1 and len(inbox.asked) == 2
    assert [d["decision"] for d in _decisions(box)] == ["force_complete"] * 2


async def test_queue_goes_on_in_a_new_turn_group_so_the_call_runs_again(
        make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    first = await box.execute("charge", A, turn_group_id="turn-q")
    inbox = Inbox(SupersedeAction.QUEUE)
    guard = _guard(box, inbox, "turn-q")
    again = await guard.execute("charge", A)
    assert first.ok and again.ok and not again.deduped and again.call_id != first.call_id
    assert ledger["payments"] == ["a", "a"]  # the new messages asked for it once more
    new = guard.turn_group_id
    assert new != "turn-q" and guard.decisions[0].continued_as == new
    assert _decisions(box)[0] == {"agent": "bot", "tool": "charge", "decision": "queue",
                                  "turn_group_id": "turn-q", "continued_as": new,
                                  "pending": 1}
    row = gateway_of(box).store.outcomes.get(again.call_id)
    assert row is not None and row.turn_group_id == new


async def test_no_pending_messages_no_question(make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    inbox = Inbox(SupersedeAction.SUPERSEDE, pending=0)
    assert (await _guard(box, inbox, "turn-n").execute("charge", A)).ok
    assert inbox.asked == [] and _decisions(box) == [] and ledger["payments"] == ["a"]


def test_the_sync_twin_and_a_sync_decision_function(make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    guard = box.guard(has_pending=lambda: True, decide=lambda planned: "queue",
                      turn_group_id="turn-sync")
    assert guard.execute_sync("charge", A).ok and guard.turn_group_id != "turn-sync"


async def test_a_decision_the_gateway_cannot_record_is_refused(make_box: Any) -> None:
    box = make_box(tools=[charge])
    calls = gateway_of(box).calls
    with pytest.raises(OperationRefused) as err:  # queue must name its new turn group
        calls.decide_turn("default", "t", SupersedeAction.QUEUE, agent="bot")
    assert err.value.reason == Reason.INVALID_ARGUMENTS
    with pytest.raises(OperationRefused):  # only queue moves to another turn group
        calls.decide_turn("default", "t", SupersedeAction.ABSORB, agent="bot",
                          continued_as="u")
    with pytest.raises(ValueError, match="absorb"):  # absorb without a way to absorb
        await box.guard(has_pending=lambda: True, decide=lambda p: "absorb").execute(
            "charge", A)
    assert _decisions(box) == []
