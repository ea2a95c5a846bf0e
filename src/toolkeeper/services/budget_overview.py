"""The ``budgets`` of the console's overview: what each budget of a tenant has spent in
its current period (``toolkeeper.pipeline.budgets`` counts, ``toolkeeper.store.budgets``
keeps), with its limits, when it resets and whether it is ``ok``, ``warning`` or
``exceeded``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from toolkeeper.model.profile import Budget, Limits
from toolkeeper.pipeline.budgets import layer_name, period_of
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.store import Store


def declared(catalog: Catalog, tenant_id: str) -> dict[str, tuple[str, Budget]]:
    """The tenant's budgets by key prefix (``{layer}:{name}:``), with their layer."""
    out: dict[str, tuple[str, Budget]] = {}
    for tenant, name in list(catalog.profiles):
        if tenant != tenant_id:
            continue
        compiled = catalog.profiles.get((tenant, name))
        if compiled is None:
            continue
        tenant_limits, profile_limits = compiled.limits
        layers: list[tuple[str, Limits]] = [("tenant", tenant_limits),
                                            ("profile", profile_limits)]
        layers += [(f"tool:{tool}", act.limits) for tool, act in compiled.activations.items()
                   if act.limits is not None]
        for layer, lim in layers:
            named = layer_name(layer, name)
            for b in lim.budgets:
                out[f"{named}:{b.name}:"] = (named, b)
    return out


def _state(b: Budget, calls: int, cost: float) -> str:
    fill = max(calls / b.max_calls if b.max_calls else 0.0,
               cost / b.max_cost if b.max_cost else 0.0)
    return "exceeded" if fill >= 1 else "warning" if fill >= b.warn_at else "ok"


def budgets(store: Store, catalog: Catalog, tenant_id: str, at: datetime
            ) -> list[dict[str, Any]]:
    """Each budget key's spend in its current period, fullest first."""
    found = declared(catalog, tenant_id)
    if not found:
        return []
    day, month = period_of("day", at), period_of("month", at)
    resets = {day[0]: day[1], month[0]: month[1]}
    out = []
    for key, period, calls, cost in store.budgets.period_rows(tenant_id, list(resets)):
        for prefix, (layer, b) in found.items():
            if not key.startswith(prefix) or period[0] != b.period[0]:
                continue
            # what the key counts, without its kind and tenant (``a:{tenant}:bot`` → bot)
            subject = key[len(prefix):].split(":", 2)[2:]
            out.append({"budget": b.name, "layer": layer, "per": b.per, "period": b.period,
                        "subject": subject[0] if subject else None, "calls": calls,
                        "cost": cost, "max_calls": b.max_calls, "max_cost": b.max_cost,
                        "warn_at": b.warn_at, "resets_at": resets[period].isoformat(),
                        "state": _state(b, calls, cost)})
    fill = {"exceeded": 0, "warning": 1, "ok": 2}
    return sorted(out, key=lambda r: (fill[r["state"]], r["budget"], r["subject"] or ""))
