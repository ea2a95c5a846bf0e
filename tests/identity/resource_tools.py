"""Native tools for the resource-server face tests (referenced from their config)."""

from __future__ import annotations

from toolkeeper import tool
from toolkeeper.model.enums import Risk, SideEffect


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW, scopes=("wire",))
def wire(amount: int) -> dict[str, int]:
    """Needs scope ``wire`` (granted by the profile, and by tokens with ``tools:wire``)."""
    return {"wired": amount}
