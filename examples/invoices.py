"""What the three framework examples share: two invoice tools, an agent whose payments
need an approver, and that approver (importable as ``invoices``: Python puts a script's own
directory on ``sys.path``)."""

from __future__ import annotations

from typing import Any

from toolkeeper import (
    Activation,
    Agent,
    Autonomy,
    Gate,
    Gateway,
    Principal,
    Profile,
    Risk,
    Role,
    SideEffect,
    tool,
)

ALICE = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))
"""The human who decides on payments (an approver, never the agent itself)."""


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def find_invoice(number: str) -> dict[str, Any]:
    """Find an invoice by its number."""
    return {"number": number, "supplier": "acme", "amount": 120}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
def pay_invoice(number: str, amount: int) -> dict[str, Any]:
    """Pay an invoice."""
    return {"paid": number, "amount": amount}


def open_gateway(url: str) -> Gateway:
    """The gateway on ``url`` with both tools, profile ``accounts`` (payments gated by an
    approval) and agent ``accounts-bot``."""
    gw = Gateway.open(url)
    gw.registry.register(find_invoice)
    gw.registry.register(pay_invoice)
    gw.registry.put_profile(Profile(
        name="accounts", autonomy=Autonomy.GUARDED,
        activations=(Activation(tool="find_invoice"),
                     Activation(tool="pay_invoice", gates={"run": Gate.APPROVE}))))
    gw.registry.put_agent(Agent(name="accounts-bot", profile="accounts"))
    return gw
