"""Step 3: arguments against the action's JSON Schema, with only the documented coercions
(``toolkeeper.pipeline.coercions``)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
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
from toolkeeper.pipeline.coercions import coerce
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState

MAX_ERRORS = 20


def validate(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.tool is not None and st.action is not None
    tool = st.tool
    args = coerce(st.request.arguments, tool.coercions(st.action))
    try:
        # a local: orjson's output keeps a 4 KiB buffer, which calls queued for the audit
        # writer would hold on to
        args_bytes = canonical_bytes(args)
    except NotCanonicalizable as exc:
        return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                       f"arguments are not JSON: {exc}",
                       details={"errors": [{"pointer": exc.pointer, "message": str(exc)}]})
    cap = _payload_cap(rt, st)
    if len(args_bytes) > cap:
        return st.stop(EventType.POLICY_DENIED, Reason.PAYLOAD_TOO_LARGE,
                       f"arguments are {len(args_bytes)} bytes; the cap is {cap}",
                       details={"size": len(args_bytes), "limit": cap})
    st.args_digest = "sha256:" + hashlib.sha256(args_bytes).hexdigest()
    validator = tool.validator(st.action)
    errors = None if validator.is_valid(args) else schema_errors(validator, args)
    if errors:
        return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                       errors_text(errors), details={"errors": errors})
    if not isinstance(args, dict):
        return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                       "arguments must be a JSON object",
                       details={"errors": [{"pointer": "", "message": "not an object"}]})
    st.arguments = args
    if rt.settings.audit_arguments:
        st.audit_arguments = rt.redactor.redact(args)
    return None


def _payload_cap(rt: Runtime, st: CallState) -> int:
    """The smallest of the deployment's and the profile's layers' payload caps (remembered
    in the profile's memo: its snapshot never changes)."""
    cap = rt.settings.max_payload_bytes
    if st.profile is None:
        return cap
    found: int | None = st.profile.memo.get(("payload_cap", cap))
    if found is None:
        found = cap
        for lim in st.profile.limits:
            if lim.max_payload_bytes:
                found = min(found, lim.max_payload_bytes)
        st.profile.memo["payload_cap", cap] = found
    return found


def schema_errors(validator: Any, args: Any) -> list[dict[str, str]]:
    """``args``' violations of an action's schema (at most ``MAX_ERRORS``), by pointer."""
    errors: list[dict[str, str]] = []
    if validator.is_valid(args):  # the common case: no error objects to build
        return errors
    for err in validator.iter_errors(args):
        pointer = "".join(f"/{escape_pointer(str(p))}" for p in err.instance_path)
        errors.append({"pointer": pointer, "message": err.message})
        if len(errors) >= MAX_ERRORS:
            break
    return errors


def errors_text(errors: list[dict[str, str]]) -> str:
    return "; ".join(f"{e['pointer'] or '/'}: {e['message']}" for e in errors[:3])


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
