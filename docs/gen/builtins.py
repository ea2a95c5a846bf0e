"""reference/builtins.md: every built-in tool of ``toolkeeper.builtins.BUILTINS`` with its
description, side effect, risk, actions and policy (the JSON Schema and defaults the
console's templates show, ``services.tool_views.policy_template``)."""

from __future__ import annotations

from typing import Any

from ._attrdocs import describe
from ._md import GENERATED, cell, code, json_block, properties_table, table

INTRO = """# Built-in tools

The tools shipped with toolkeeper. Add one to a config with a `builtin:` entry
(`tools: [{builtin: web_fetch}]`) and enable it for a profile in an activation. Its policy
(the keys below) is set in the entry's `policy:` (the tool's defaults) and per profile in
an activation's `policy:`; the operator's `tenant_bounds` cap what a tenant may write. Each
tool's *side effect* and *risk* are the defaults its gates and idempotency start from; an
action may declare its own side effect. This page is generated from `toolkeeper.builtins`.

"""


def tools() -> list[tuple[str, Any, dict[str, Any]]]:
    """``(key, definition, policy template)`` of every built-in, by key."""
    from toolkeeper.builtins import BUILTINS, definition
    from toolkeeper.services.tool_views import policy_template

    out = []
    for key in sorted(BUILTINS):
        model = BUILTINS[key].policy_model
        template = policy_template(model)
        describe(template["policy_schema"], model)
        out.append((key, definition(key), template))
    return out


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def _section(key: str, d: Any, template: dict[str, Any]) -> str:
    schema = template["policy_schema"]
    parts = [f"## {key}\n\n", d.description.strip() + "\n\n"]
    parts.append(f"Side effect {code(_value(d.side_effect))} · risk {code(_value(d.risk_default))}"
                 f" · capabilities {', '.join(code(c) for c in d.capabilities) or 'none'}"
                 f" · confirmation {'required' if d.requires_confirmation else 'not required'}"
                 ".\n\n")
    actions = [[code(name), code(_value(a.side_effect or d.side_effect)),
                cell(a.description)] for name, a in d.actions.items()]
    parts.append("**Actions**\n\n" + table(["Action", "Side effect", "Description"], actions))
    parts.append(f"\n**Policy** — {cell(schema.get('description', ''))}\n\n")
    parts.append(properties_table(schema))
    for name, sub in schema.get("$defs", {}).items():
        parts.append(f"\n`{name}`: {cell(sub.get('description', ''))}\n\n")
        parts.append(properties_table(sub))
    parts.append(f'\n??? note "{key}: the policy\'s JSON Schema"\n\n')
    parts.append(json_block(schema, indent="    "))
    return "".join(parts) + "\n"


def render() -> str:
    """The page."""
    return GENERATED + INTRO + "".join(_section(*t) for t in tools())
