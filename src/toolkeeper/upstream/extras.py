"""Upstream prompts and resources as governed registry entries, pinned by hash (SPEC §7 MCP,
§8); ``toolkeeper.services.upstream_extras`` syncs them into the registry.

- Each upstream **prompt** becomes an entry of its own (``implementation_type
  "mcp_prompt"``, named ``cfg.local(prompt)``, one action ``get`` whose arguments are the
  prompt's, strings, ``additionalProperties: false``), pure, low risk (or the server's
  risk), categories ``("mcp", server, "prompt")``. Its ``upstream_hash`` covers what a
  client is shown (name, title, description, arguments): a changed prompt is a rug-pull like
  a changed tool and is quarantined.
- Each server's **resources** are ONE entry (``implementation_type "mcp_resources"``, named
  ``cfg.local("resources")``, action ``read`` with argument ``uri``). It keeps the server's
  resource templates and the listed resources' metadata (uri, name, title, description,
  mimeType, annotations, size), which is what agents are listed. What quarantines it
  (:func:`resources_drifted`): a template added, removed or changed, or a resource still
  listed under the same URI whose metadata changed. A resource that appears or goes away
  (a file created in a filesystem server) is not drift: the entry is updated to a new
  version, published as configured.

Everything read from an upstream is bounded: at most ``MAX_PROMPTS`` prompts,
``MAX_RESOURCES`` resources and ``MAX_TEMPLATES`` templates per server (the rest is left out
and logged), ``MAX_ARGUMENTS`` arguments per prompt, texts cut to ``MAX_TEXT``.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final, Literal

from toolkeeper.canonical import digest
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.tool import ActionSpec, ExecutionMeta, ToolDefinition
from toolkeeper.upstream.servers import ServerConfig

log = logging.getLogger("toolkeeper.upstream")
PROMPT: Final[Literal["mcp_prompt"]] = "mcp_prompt"
RESOURCES: Final[Literal["mcp_resources"]] = "mcp_resources"
RELAYED = frozenset({PROMPT, RESOURCES})
"""Entries relayed over MCP as prompts and resources, never listed as tools."""
MAX_PROMPTS = 500
MAX_RESOURCES = 1000
MAX_TEMPLATES = 100
MAX_ARGUMENTS = 64
MAX_TEXT = 4000
MAX_URI = 2048
MAX_ARGUMENT_CHARS = 16_000
"""Of one prompt argument's value (the pipeline's validation refuses more)."""
_PROMPT_KEYS = ("name", "title", "description", "arguments")
_ARG_KEYS = ("name", "title", "description", "required")
_RESOURCE_KEYS = ("uri", "name", "title", "description", "mimeType", "annotations", "size")
_TEMPLATE_KEYS = ("uriTemplate", "name", "title", "description", "mimeType", "annotations")


def _wire(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dumped: dict[str, Any] = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _cut(value: Any) -> Any:
    """Strings cut to ``MAX_TEXT`` (nested ones too)."""
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, dict):
        return {str(k)[:200]: _cut(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list):
        return [_cut(v) for v in value[:50]]
    return value


def bounded(items: list[Any], cap: int, what: str, server: str) -> list[Any]:
    if len(items) > cap:
        log.warning("upstream %s lists %d %s: only the first %d are relayed", server,
                    len(items), what, cap)
    return items[:cap]


def prompt_wire(prompt: Any) -> dict[str, Any]:
    """What a client is shown of an upstream prompt (bounded)."""
    wire = _wire(prompt)
    out = {k: _cut(wire[k]) for k in _PROMPT_KEYS[:3] if wire.get(k) is not None}
    args = [{k: _cut(a[k]) for k in _ARG_KEYS if a.get(k) is not None}
            for a in (wire.get("arguments") or [])[:MAX_ARGUMENTS]]
    if args:
        out["arguments"] = args
    return out


def prompt_schema(wire: dict[str, Any]) -> dict[str, Any]:
    """The ``get`` action's arguments: the prompt's, strings, required ones required."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for arg in wire.get("arguments", ()):
        name = str(arg["name"])
        props[name] = {"type": "string", "maxLength": MAX_ARGUMENT_CHARS,
                       **({"description": arg["description"]} if arg.get("description")
                          else {})}
        if arg.get("required"):
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": props,
                              "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _config_hash(cfg: ServerConfig, risk: str) -> str:
    return digest({"side_effect": "pure", "risk": risk, "timeout_s": cfg.timeout_s})


def prompt_definition(cfg: ServerConfig, prompt: Any) -> ToolDefinition:
    """The governed entry of one upstream prompt."""
    wire = prompt_wire(prompt)
    risk = cfg.risk if cfg.risk in (Risk.HIGH, Risk.CRITICAL) else Risk.LOW
    return ToolDefinition(
        name=cfg.local(str(wire["name"])), description=str(wire.get("description", "")),
        tenant_id=cfg.tenant, implementation_type=PROMPT,
        implementation={"server": cfg.name, "prompt": wire["name"], "definition": wire,
                        "upstream_hash": digest(wire),
                        "config_hash": _config_hash(cfg, risk)},
        execution=ExecutionMeta(timeout_s=cfg.timeout_s, is_pure=True),
        actions={"get": ActionSpec(description="Get this upstream prompt's messages")},
        input_schema=prompt_schema(wire), side_effect=SideEffect.PURE, risk_default=Risk(risk),
        categories=("mcp", cfg.name, "prompt"), origin="config")


def resource_wire(resource: Any) -> dict[str, Any]:
    wire = _wire(resource)
    return {k: _cut(wire[k]) for k in _RESOURCE_KEYS if wire.get(k) is not None}


def template_wire(template: Any) -> dict[str, Any]:
    wire = _wire(template)
    return {k: _cut(wire[k]) for k in _TEMPLATE_KEYS if wire.get(k) is not None}


def resources_definition(cfg: ServerConfig, resources: list[Any],
                         templates: list[Any]) -> ToolDefinition:
    """The one governed entry of a server's resources and templates."""
    listed = sorted((resource_wire(r) for r in resources
                     if len(str(_wire(r).get("uri", ""))) <= MAX_URI),
                    key=lambda r: str(r.get("uri")))
    shapes = [template_wire(t) for t in templates]
    risk = cfg.risk if cfg.risk in (Risk.HIGH, Risk.CRITICAL) else Risk.LOW
    return ToolDefinition(
        name=cfg.local("resources"),
        description=f"Read the resources of the upstream MCP server {cfg.name}",
        tenant_id=cfg.tenant, implementation_type=RESOURCES,
        implementation={"server": cfg.name, "resources": listed, "templates": shapes,
                        "upstream_hash": digest({"resources": listed, "templates": shapes}),
                        "templates_hash": digest(shapes),
                        "config_hash": _config_hash(cfg, risk)},
        execution=ExecutionMeta(timeout_s=cfg.timeout_s, is_pure=True),
        actions={"read": ActionSpec(description="Read one resource by its URI")},
        input_schema={"type": "object", "required": ["uri"], "additionalProperties": False,
                      "properties": {"uri": {"type": "string", "minLength": 1,
                                             "maxLength": MAX_URI}}},
        side_effect=SideEffect.PURE, risk_default=Risk(risk),
        categories=("mcp", cfg.name, "resources"), origin="config")


def resources_drifted(pinned: dict[str, Any], fresh: dict[str, Any]) -> bool:
    """Whether a server's resources changed in a way that quarantines (module docstring)."""
    if pinned.get("templates_hash") != fresh.get("templates_hash"):
        return True
    before = {r.get("uri"): r for r in pinned.get("resources", ())}
    return any(uri in before and before[uri] != r
               for r in fresh.get("resources", ()) if (uri := r.get("uri")) is not None)


_EXPR = re.compile(r"\{([+#./;?&]?)([^}]*)\}")


def template_regex(template: str) -> re.Pattern[str] | None:
    """A regular expression matching the URIs of an RFC 6570 template (levels 1-3, as MCP
    servers use them): ``{x}`` one path segment, ``{+x}``/``{#x}`` anything, ``{?x,y}`` and
    ``{&x}`` an optional query part."""
    parts: list[str] = []
    pos = 0
    for m in _EXPR.finditer(template):
        parts.append(re.escape(template[pos:m.start()]))
        op = m.group(1)
        if op in ("+", "#"):
            parts.append(("#" if op == "#" else "") + ".*")
        elif op in ("?", "&"):
            parts.append(r"(?:[?&][^#]*)?")
        elif op in (".", "/", ";"):
            parts.append(re.escape(op) + r"[^/?#]*")
        else:
            parts.append(r"[^/?#]+")
        pos = m.end()
    parts.append(re.escape(template[pos:]))
    try:
        return re.compile("^" + "".join(parts) + "$")
    except re.error:
        return None


def claims(implementation: dict[str, Any], uri: str) -> bool:
    """Whether a server's resources entry lists ``uri`` or has a template matching it."""
    if len(uri) > MAX_URI:
        return False
    if any(r.get("uri") == uri for r in implementation.get("resources", ())):
        return True
    for t in implementation.get("templates", ()):
        pattern = template_regex(str(t.get("uriTemplate", "")))
        if pattern is not None and pattern.match(uri):
            return True
    return False


def has_template(implementation: dict[str, Any], template: str) -> bool:
    return any(t.get("uriTemplate") == template for t in implementation.get("templates", ()))
