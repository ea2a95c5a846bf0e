"""The README's Toolbox example runs as written (on the library example's gateway)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from toolkeeper import (
    Activation,
    Agent,
    Autonomy,
    Gateway,
    Principal,
    Profile,
    Risk,
    Role,
    SideEffect,
    tool,
)

README = Path(__file__).parents[2] / "README.md"
PAID: list[str] = []


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
async def pay_invoice(invoice: str, amount: int) -> dict[str, Any]:
    """Pay an invoice."""
    PAID.append(invoice)
    return {"paid": invoice, "amount": amount}


async def test_readme_toolbox_example_runs(db_url: str) -> None:
    block = next(b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
                 if "Toolbox(InProcessBackend" in b)
    PAID.clear()
    with Gateway.open(db_url) as gw:
        gw.registry.register(pay_invoice)
        gw.registry.put_profile(Profile(name="billing", autonomy=Autonomy.SUPERVISED,
                                        activations=(Activation(tool="pay_invoice"),)))
        gw.registry.put_agent(Agent(name="billing-bot", profile="billing"))
        alice = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))
        scope: dict[str, Any] = {"gw": gw, "alice": alice}
        exec(compile("async def example():\n" + textwrap.indent(block, "    ")
                     + "    return r, turn\n", "README.md", "exec"), scope)
        r, turn = await scope["example"]()
        assert r.ok and PAID == ["inv-7"]
        late = {"arguments": {"invoice": "inv-8", "amount": 1}, "agent": "billing-bot",
                "turn_group_id": turn.turn_group_id}
        ask = await gw.call("pay_invoice", **late)  # the gate comes before supersede
        gw.approvals.confirm(ask.approval_id, alice)
        stopped = await gw.call("pay_invoice", **late)
        assert stopped.reason == "superseded" and PAID == ["inv-7"]
