"""A typed REST client for ``toolkeeper serve`` (an agent's or an operator's token).

One async core, two faces: :class:`AsyncClient` and :class:`Client` (blocking). Calls
return the library's :class:`~toolkeeper.model.call.CallResult`; ``call_or_raise`` raises
the library's ``CallStopped`` family; other refusals raise :class:`RequestRefused` (an
``OperationRefused`` with the server's ``reason``); a server that does not answer within
the bounded wait makes ``execute`` return a result with reason ``unavailable`` (``failed``
if nothing was sent, ``unknown`` if an answer was lost) and other operations raise
:class:`ServerUnavailable`.
"""

from toolkeeper.client._async import (
    AsyncApprovals,
    AsyncAudit,
    AsyncCalls,
    AsyncClient,
    AsyncDiscovery,
)
from toolkeeper.client._core import MIN_SERVER_VERSION
from toolkeeper.client._errors import RequestRefused, ServerTooOld, ServerUnavailable
from toolkeeper.client._models import (
    AgentTools,
    Approval,
    AuditEvent,
    AuditPage,
    AuditVerification,
    DiscoveredTool,
    Outcome,
    Superseded,
    ToolView,
    TurnDecided,
)
from toolkeeper.client._sync import Approvals, Audit, Calls, Client, Discovery
from toolkeeper.client.backend import RemoteBackend

__all__ = [
    "MIN_SERVER_VERSION",
    "AgentTools",
    "Approval",
    "Approvals",
    "AsyncApprovals",
    "AsyncAudit",
    "AsyncCalls",
    "AsyncClient",
    "AsyncDiscovery",
    "Audit",
    "AuditEvent",
    "AuditPage",
    "AuditVerification",
    "Calls",
    "Client",
    "DiscoveredTool",
    "Discovery",
    "Outcome",
    "RemoteBackend",
    "RequestRefused",
    "ServerTooOld",
    "ServerUnavailable",
    "Superseded",
    "ToolView",
    "TurnDecided",
]
