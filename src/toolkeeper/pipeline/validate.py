"""Step 3: arguments against the action's JSON Schema, with only documented coercions.

Coercions (the only ones):
- ``None`` arguments are ``{}``;
- a bare string, when the schema has exactly one required property and it is a string,
  becomes ``{that_property: string}``;
- a property may declare ``"x-aliases": ["q", …]``; an alias key is renamed to the property
  when the property itself is absent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from toolkeeper.canonical import (
    NotCanonicalizable,
    canonical_bytes,
    escape_pointer,
    invalid_unicode,
)
from toolkeeper.model.call import CallResult
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState

MAX_ERRORS = 20


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


def validate(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.tool is not None and st.action is not None
    tool = st.tool
    args = coerce(st.request.arguments, tool.coercions(st.action))
    try:
        st.args_bytes = canonical_bytes(args)
    except NotCanonicalizable as exc:
        return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                       f"arguments are not JSON: {exc}",
                       details={"errors": [{"pointer": exc.pointer, "message": str(exc)}]})
    cap = rt.settings.max_payload_bytes
    for lim in (st.profile.limits if st.profile else ()):
        if lim.max_payload_bytes:
            cap = min(cap, lim.max_payload_bytes)
    if len(st.args_bytes) > cap:
        return st.stop(EventType.POLICY_DENIED, Reason.PAYLOAD_TOO_LARGE,
                       f"arguments are {len(st.args_bytes)} bytes; the cap is {cap}",
                       details={"size": len(st.args_bytes), "limit": cap})
    st.args_digest = "sha256:" + hashlib.sha256(st.args_bytes).hexdigest()
    validator = tool.validator(st.action)
    if not validator.is_valid(args):
        errors = []
        for err in validator.iter_errors(args):
            pointer = "".join(f"/{escape_pointer(str(p))}" for p in err.instance_path)
            errors.append({"pointer": pointer, "message": err.message})
            if len(errors) >= MAX_ERRORS:
                break
        return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                       "; ".join(f"{e['pointer'] or '/'}: {e['message']}" for e in errors[:3]),
                       details={"errors": errors})
    if not isinstance(args, dict):
        return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                       "arguments must be a JSON object",
                       details={"errors": [{"pointer": "", "message": "not an object"}]})
    st.arguments = args
    if rt.settings.audit_arguments:
        st.audit_arguments = rt.redactor.redact(args)
    return None


_TEXT_FIELDS = ("tool", "action", "idempotency_key", "turn_group_id", "task_id", "step_id",
                "trace_id", "approval_id", "preview_token")
_text_of = attrgetter(*_TEXT_FIELDS)


def text_fields(st: CallState) -> CallResult | None:
    """The call's own ids and names must be valid Unicode before any step records them:
    a lone surrogate is ``invalid_arguments`` with the field's pointer. The request is
    replaced by a copy with such characters escaped, so the audit event can be written."""
    req = st.request
    for value in _text_of(req):
        if value is not None and not (value.__class__ is str and value.isascii()):
            break  # look closer (the common case, ASCII or nothing, costs this loop only)
    else:
        if not req.scopes:
            return None
    bad = [f for f in _TEXT_FIELDS if invalid_unicode(getattr(req, f)) is not None]
    if req.scopes is not None and invalid_unicode(list(req.scopes)) is not None:
        bad.append("scopes")
    if not bad:
        return None
    fixed = {f: _escaped(getattr(req, f)) for f in bad}
    if "scopes" in fixed:
        fixed["scopes"] = [_escaped(s) for s in req.scopes or ()]
    st.request = replace(req, **fixed)
    message = "not valid Unicode (a lone surrogate)"
    return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                   f"{', '.join(bad)}: {message}",
                   details={"errors": [{"pointer": f"/{f}", "message": message} for f in bad]})


def _escaped(value: Any) -> Any:
    return value.encode("utf-8", "backslashreplace").decode("utf-8") \
        if isinstance(value, str) else value
