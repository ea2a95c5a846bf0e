"""Accessibility scans of the admin console with axe-core (pinned in tests/peers).

``assert_accessible(page, context="tools, drawer open")`` injects ``axe.min.js`` into the
page and fails on any ``serious`` or ``critical`` violation, listing rule id, target and
help. The source goes in through ``page.evaluate`` (the devtools protocol, which the page's
strict CSP does not govern), so the console keeps its normal CSP during the scan. Without
``tests/peers/node_modules/axe-core`` (``make peers``) the scan skips with a loud reason
locally and fails under ``CI=true``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page

from tests.support.required import missing

AXE = Path(__file__).resolve().parents[1] / "peers" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


def axe_source() -> str:
    """``axe.min.js``, or a skip (a failure under ``CI=true``) when it is not installed."""
    if not AXE.is_file():
        message = (f"NO AXE-CORE: the console's accessibility scans need {AXE} "
                   "(make peers installs tests/peers/package.json)")
        missing(message)
    return AXE.read_text(encoding="utf-8")


def violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of the page as it is now (WCAG 2.x A/AA
    and best practices)."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(axe_source() + "\n;undefined")
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
             .filter((v) => ["serious", "critical"].includes(v.impact))
             .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                           targets: v.nodes.map((n) => n.target.join(" "))}))""")
    return found


def describe(found: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {v['impact']} {v['id']}: {v['help']} — at {', '.join(v['targets'])}"
                     for v in found)


def assert_accessible(page: Page, context: str) -> None:
    """Fails with a readable list when axe-core finds a serious or critical violation."""
    found = violations(page)
    assert not found, f"accessibility violations ({context}):\n{describe(found)}"


def horizontal_overflow(page: Page) -> int:
    """How many CSS pixels the page scrolls sideways (0 when it fits its viewport)."""
    width: int = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth")
    return width
