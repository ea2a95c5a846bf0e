"""The only coercions of call arguments (step 3, ``validate``), read from the action's
schema once per tool version (``CompiledTool.coercions``):

- ``None`` arguments are ``{}``;
- a bare string, when the schema has exactly one required property and it is a string,
  becomes ``{that_property: string}``;
- a property may declare ``"x-aliases": ["q", …]``; an alias key is renamed to the property
  when the property itself is absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Coercions:
    """What an action's schema allows to be coerced, worked out once per tool version."""

    bare_string: str | None
    """The single required string property a bare string fills."""
    aliases: tuple[tuple[str, tuple[str, ...]], ...]
    """(property, its declared ``x-aliases``) pairs."""

    @classmethod
    def of(cls, schema: dict[str, Any]) -> Coercions:
        props = schema.get("properties")
        if not isinstance(props, dict):
            return cls(None, ())
        required = schema.get("required") or []
        bare = None
        if len(required) == 1 and isinstance(props.get(required[0]), dict) and \
                props[required[0]].get("type") == "string":
            bare = required[0]
        aliases = tuple(
            (name, tuple(a for a in sub["x-aliases"] if isinstance(a, str) and a not in props))
            for name, sub in props.items()
            if isinstance(sub, dict) and isinstance(sub.get("x-aliases"), list))
        return cls(bare, aliases)


def coerce(arguments: Any, rules: Coercions) -> Any:
    if arguments is None:
        return {}
    if isinstance(arguments, str) and rules.bare_string is not None:
        return {rules.bare_string: arguments}
    if rules.aliases and isinstance(arguments, dict):
        for name, aliases in rules.aliases:
            if name in arguments:
                continue
            for alias in aliases:
                if alias in arguments:
                    arguments = {**arguments}
                    arguments[name] = arguments.pop(alias)
                    break
    return arguments
