"""Supersede decisions (seed 004 §10), each path scripted: a user's new message arrives
while the agent is about to send an irreversible email; the runtime decides what to do.

    python examples/supersede_decisions.py    (a store in a temporary directory)
"""

import asyncio
import tempfile

from toolkeeper import Activation, Agent, Autonomy, Gateway, Profile, Risk, SideEffect, tool
from toolkeeper.toolbox import InProcessBackend, PlannedCall, Toolbox

SENT: list[str] = []


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
async def send_email(to: str, subject: str) -> dict:
    """Send an email (cannot be unsent)."""
    SENT.append(subject)
    return {"sent": subject}


class Runtime:
    """A scripted agent runtime: one pending user message, and a fixed decision."""

    def __init__(self, decision: str) -> None:
        self.decision, self.pending = decision, ["actually, cc Bob"]

    def has_pending(self) -> bool:
        return bool(self.pending)

    def decide(self, planned: PlannedCall) -> str:
        return self.decision  # a real brain would weigh planned.tool and the messages

    def absorb(self) -> None:
        self.pending.clear()  # the messages become part of this turn's context


async def path(box: Toolbox, decision: str, turn: str) -> None:
    email = {"to": "alice@example.com", "subject": f"report ({decision})"}
    await box.execute("send_email", email, turn_group_id=turn)  # sent before the message
    rt = Runtime(decision)
    guard = box.guard(has_pending=rt.has_pending, decide=rt.decide, absorb=rt.absorb,
                      turn_group_id=turn)
    r = await guard.execute("send_email", email)  # the answer plans the same email again
    moved = "new turn group" if guard.turn_group_id != turn else "same turn group"
    print(f"{decision}: {r.status.value}, deduped={r.deduped}, {moved}, "
          f"sent {SENT.count(email['subject'])}x")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, Gateway.open(f"sqlite:///{tmp}/t.db") as gw:
        gw.registry.register(send_email)
        gw.registry.put_profile(Profile(name="mail", autonomy=Autonomy.AUTONOMOUS,
                                        activations=(Activation(tool="send_email"),)))
        gw.registry.put_agent(Agent(name="mail-bot", profile="mail"))
        box = Toolbox(InProcessBackend(gw), agent="mail-bot")
        for n, decision in enumerate(("supersede", "absorb", "force_complete", "queue")):
            await path(box, decision, f"turn-{decision}-{n}")
        decided = gw.store.audit.list("default", types=["turn.decided"])
        print("audit:", [e.data["decision"] for e in decided])


asyncio.run(main())
