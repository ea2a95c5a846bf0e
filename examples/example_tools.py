"""A native tool for ``examples/toolkeeper.yaml`` (importable because apply puts the config
file's directory on ``sys.path`` while it loads entry points)."""

from __future__ import annotations

from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.providers.native import tool


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW, inline=True)
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())
