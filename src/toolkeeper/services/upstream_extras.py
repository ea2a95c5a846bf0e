"""Syncing an upstream server's prompts and resources into the registry, like its tools
(``toolkeeper.upstream.extras`` says what each entry is and what drift means): new ones
imported and published (their hash pinned), changed ones quarantined with a
``tool.quarantined`` audit event until an admin re-publishes them."""

from __future__ import annotations

import logging
from typing import Any

from toolkeeper.errors import OperationRefused
from toolkeeper.upstream.extras import (
    MAX_PROMPTS,
    MAX_RESOURCES,
    MAX_TEMPLATES,
    bounded,
    prompt_definition,
    resources_definition,
    resources_drifted,
)
from toolkeeper.upstream.servers import ServerConfig

log = logging.getLogger("toolkeeper.upstream")


def sync_extras(sync: Any, cfg: ServerConfig, found: dict[str, list[Any] | None],
                report: Any) -> Any:
    """Sync what ``list_extras`` found on ``cfg``'s server into ``report`` (a ``SyncReport``
    of ``sync``, the server's ``UpstreamSync``)."""
    prompts = bounded(found.get("prompts") or [], MAX_PROMPTS, "prompts", cfg.name)
    with sync._batch():
        for prompt in prompts:
            _one(sync, cfg, report, lambda p=prompt: prompt_definition(cfg, p),
                 upstream_prompt=str(prompt.name)[:200])
        if found.get("resources") is not None or found.get("templates") is not None:
            resources = bounded(found.get("resources") or [], MAX_RESOURCES, "resources",
                                cfg.name)
            templates = bounded(found.get("templates") or [], MAX_TEMPLATES,
                                "resource templates", cfg.name)
            # a server offering none gets no entry (until it offers some)
            if resources or templates or sync._store.registry.tool(
                    cfg.local("resources"), cfg.tenant) is not None:
                _one(sync, cfg, report,
                     lambda: resources_definition(cfg, resources, templates),
                     drifted=resources_drifted, upstream_resources=True)
    if report.quarantined:
        log.warning("upstream %s changed prompts or resources %s: quarantined until "
                    "re-published", cfg.name, ", ".join(report.quarantined))
    return report


def _one(sync: Any, cfg: ServerConfig, report: Any, make: Any,
         **about: Any) -> None:
    """One entry; one the registry refuses (an invalid or clashing name) is left out."""
    try:
        sync.sync_definition(cfg, make(), report, **about)
    except (OperationRefused, ValueError) as exc:
        log.warning("upstream %s: %s not imported: %s", cfg.name, about, str(exc)[:300])
