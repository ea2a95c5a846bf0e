"""Which code a tool written through the API may name: only what the operator offers.

A tenant admin creates and edits tools (``POST``/``PUT /tools``, ``origin == "api"``); the
Python that runs is the operator's alone. Such a definition is refused with
``entry_point_not_allowed`` when it is ``native`` or ``artifact``, or carries
``implementation.entry_point`` or constructor arguments ``implementation.init`` whatever its
type; and with ``function_not_allowed`` when a ``function`` tool names a function outside
the operator's allow-list (config ``functions:``). Each refusal has a JSON pointer into the
REST body.

Tenants still reach the operator's code through built-ins (``builtin_key``) and global
tools, and through tools the operator defined for their tenant: an edit that leaves such a
tool's ``native`` entry point as it is keeps it (it runs only while the operator has it
registered, see ``providers/factory.py``, which enforces the same at run time).

An edit that leaves an operator's tool wired as it is (an ``mcp`` tool imported from
``servers:``, an ``artifact`` tool, a ``native`` one…) and changes only its governance (risk,
side effect, scopes, confirmation, description, schemas) keeps the operator's origin: the
wiring, its credentials and its pinned artifact stay the operator's, so it still publishes
(:func:`keeps_operator_wiring`). Any other edit makes the tool the tenant's, checked as above.
"""

from __future__ import annotations

from collections.abc import Container

from toolkeeper.errors import OperationRefused
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.factory import tenant_code_problem
from toolkeeper.secrets.base import LITERAL_SECRET_ADVICE, literal_secrets

_OPERATOR_ONLY = "Python code comes only from the operator"
_OPERATOR_PART = ("implementation_type", "implementation", "artifact_id", "artifact_version",
                  "connector_id", "builtin_key", "policy")
"""What an edit leaves as it is for an operator's tool to stay the operator's: its wiring
(compared exactly, a pinned ``artifact_hash`` included), whose secrets it reads, and its
tool-level policy (an operator's tool is its own ceiling, ``providers/ceiling.py``)."""


def _refuse(reason: Reason, message: str, pointer: str) -> OperationRefused:
    return OperationRefused(reason, message, pointer=pointer)


def _same_native(tool: ToolDefinition, current: ToolDefinition | None) -> bool:
    return current is not None and current.implementation_type == "native" and \
        tool.implementation_type == "native" and \
        tool.implementation.get("entry_point") == current.implementation.get("entry_point")


def keeps_operator_wiring(tool: ToolDefinition, current: ToolDefinition) -> bool:
    """Whether ``tool`` replaces the operator's ``current`` (origin other than ``api``) and
    changes none of :data:`_OPERATOR_PART`, only governance fields."""
    return current.origin != "api" and all(
        getattr(tool, name) == getattr(current, name) for name in _OPERATOR_PART)


def check_tenant_code(tool: ToolDefinition, current: ToolDefinition | None,
                      functions: Container[str]) -> None:
    """Refuse a tenant-written ``tool`` that names code the operator did not offer;
    ``current`` is the working copy it replaces (``None`` on creation)."""
    impl = tool.implementation
    problem = tenant_code_problem(tool)
    if problem is not None:
        raise _refuse(Reason.ENTRY_POINT_NOT_ALLOWED, f"{_OPERATOR_ONLY}: {problem[0]}",
                      problem[1])
    if _same_native(tool, current):
        return
    if "entry_point" in impl:
        raise _refuse(Reason.ENTRY_POINT_NOT_ALLOWED, f"{_OPERATOR_ONLY}: a tool defined "
                      "here cannot name an entry point; use a built-in or a global tool",
                      "/implementation_config/entry_point")
    if tool.implementation_type == "native":
        raise _refuse(Reason.ENTRY_POINT_NOT_ALLOWED, f"{_OPERATOR_ONLY}: native tools are "
                      "configured by the operator; use a built-in or a global tool",
                      "/implementation_type")
    if tool.implementation_type == "function":
        name = impl.get("function_name")
        if not isinstance(name, str) or name not in functions:
            raise _refuse(Reason.FUNCTION_NOT_ALLOWED, "implementation_config.function_name "
                          "must name a function of the operator's allow-list",
                          "/implementation_config/function_name")


def refuse_literal_secrets(tool: ToolDefinition) -> None:
    """SPEC §6: a tool's config holds ``${secret:…}`` references, never a credential. A
    tenant-written value under a credential-named key (``api_key``, ``Authorization``,
    ``client_secret``…) that is not only references is ``secret_literal_refused``, each
    with its JSON pointer (the same rule ``toolkeeper check`` applies to config files)."""
    found = [*literal_secrets(tool.implementation, ("implementation_config",)),
             *literal_secrets(tool.policy, ("policy",))]
    if not found:
        return
    pointers = ["/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)
                for path in found]
    advice = LITERAL_SECRET_ADVICE
    raise OperationRefused(
        Reason.SECRET_LITERAL_REFUSED, f"{pointers[0]} holds a literal credential: {advice}",
        errors=[{"pointer": p, "message": f"a literal credential: {advice}"} for p in pointers])
