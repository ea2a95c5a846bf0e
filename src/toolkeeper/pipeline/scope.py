"""Step 4: the tool's required scopes ⊆ the granted scopes (a request may only narrow)."""

from __future__ import annotations

from toolkeeper.model.call import CallResult
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.catalog import CompiledTool
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState


def missing_scopes(tool: CompiledTool, action: str,
                   granted: frozenset[str]) -> frozenset[str]:
    """The scopes ``action`` needs beyond ``granted`` (the rule listings apply too)."""
    return tool.scopes(action) - granted


def granted_scopes(profile: frozenset[str], token: frozenset[str] | None) -> frozenset[str]:
    """The profile's scopes narrowed by the caller's OAuth token (``Principal.scopes``),
    the rule the call and every listing apply."""
    return profile if token is None else profile & token


def scope(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.profile is not None and st.tool is not None and st.action is not None
    granted = granted_scopes(st.profile.scopes,
                             st.principal.scopes if st.principal is not None else None)
    asked = st.request.scopes
    if asked is not None:
        granted = granted & frozenset(s for s in asked if isinstance(s, str))
    st.granted_scopes = granted
    missing = missing_scopes(st.tool, st.action, granted)
    if missing:
        return st.stop(EventType.SCOPE_DENIED, Reason.SCOPE_MISSING,
                       f"missing scopes: {', '.join(sorted(missing))}",
                       details={"missing": sorted(missing)})
    return None
