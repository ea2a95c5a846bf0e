"""``serve --demo`` runs the five demo tools on one in-memory ledger, as ``toolkeeper demo``
does: a payment shows in the next look-up and its refund finds it (issue 15: a new user
following the README saw a paid invoice still open)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.server import ServerSettings, build


def test_a_demo_payment_shows_in_the_next_lookup_and_is_refundable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the demo's generated secrets key file lands here
    srv = build(ServerSettings(demo=True, database_url=f"sqlite:///{tmp_path}/demo.db"))
    gw = srv.gw
    try:
        bot = gw.principal(agent="billing-bot")
        pay = {"invoice_id": "INV-1002", "amount": 480}
        asked = gw.call_sync("pay_invoice", arguments=pay, principal=bot)
        assert (asked.status.value, asked.gate) == ("confirmation_required", "confirm"), asked
        assert asked.approval_id is not None
        gw.approvals.confirm(asked.approval_id, by=bot)
        paid = gw.call_sync("pay_invoice", arguments=pay, principal=bot,
                            approval_id=asked.approval_id)
        assert paid.status.value == "succeeded", paid
        looked = gw.call_sync("lookup_invoice", arguments={"invoice_id": "INV-1002"},
                              principal=bot)
        assert (looked.output["status"], looked.output["paid"]) == ("paid", 480), looked
        refund = gw.call_sync("refund_invoice", principal=bot, arguments={
            "payment_id": paid.output["payment_id"], "invoice_id": "INV-1002", "amount": 480})
        assert refund.status.value == "succeeded", refund
    finally:
        gw.close()
