"""Batches (SPEC §5): ``sequential`` stops after a failed critical call (rolling back
completed compensatable effects, saga-style) — critical as the caller flags it
(``CallRequest.critical``), else when the call's risk is ``critical``; ``parallel_safe``
runs pure calls and calls with free concurrency-group capacity together, the rest in order.
Results keep request order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import CallStatus, Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.services.calls import CallFn, CallService
from toolkeeper.store import Store

MAX_BATCH = 100


def _skipped(req: CallRequest) -> CallResult:
    return CallResult(call_id="", status=CallStatus.DENIED, tool=str(req.tool),
                      action=req.action, reason=Reason.BATCH_ABORTED,
                      message="not run: an earlier critical call in the batch failed")


def _critical(req: CallRequest, res: CallResult) -> bool:
    """The caller's flag wins; without one, a call is critical when its risk is."""
    return req.critical if req.critical is not None else res.risk is Risk.CRITICAL


class Batches:
    """Runs batches through ``call`` (the pipeline); a rollback compensates through
    ``calls``."""

    def __init__(self, store: Store, *, call: CallFn, calls: CallService,
                 catalog: Callable[[], Catalog]) -> None:
        self._store = store
        self._call = call
        self._calls = calls
        self._catalog = catalog

    async def run(self, requests: list[CallRequest], *, mode: str,
                  principal: Principal | None) -> list[CallResult]:
        if mode not in ("sequential", "parallel_safe"):
            raise ValueError("mode must be 'sequential' or 'parallel_safe'")
        if len(requests) > MAX_BATCH:
            raise ValueError(f"a batch holds at most {MAX_BATCH} calls")
        if mode == "parallel_safe":
            return await self._parallel(requests, principal)
        results: list[CallResult] = []
        for i, req in enumerate(requests):
            res = await self._call(req, principal=principal)
            results.append(res)
            if res.status is not CallStatus.SUCCEEDED and _critical(req, res):
                await self._rollback(results, principal)
                results.extend(_skipped(r) for r in requests[i + 1:])
                break
        return results

    async def _rollback(self, done: list[CallResult], principal: Principal | None) -> None:
        """Compensate completed compensatable effects, newest first."""
        if principal is None:
            return
        for res in reversed(done):
            if res.status is CallStatus.SUCCEEDED and res.side_effect_id:
                effect = self._store.outcomes.side_effect(res.side_effect_id)
                if effect is not None and effect.policy == SideEffect.COMPENSATABLE.value:
                    comp = await self._calls.compensate(res.side_effect_id, principal)
                    if comp.status is CallStatus.SUCCEEDED:
                        res.status = CallStatus.COMPENSATED

    def _group(self, req: CallRequest, tenant: str) -> tuple[bool, str, int]:
        rec = self._catalog().record(tenant, str(req.tool))
        if rec is None:
            return True, "", 0
        tool = rec[1]
        action = req.action or next(iter(tool.actions))
        pure = action in tool.actions and tool.action_side_effect(action) is SideEffect.PURE
        return pure, tool.execution.concurrency_group, tool.execution.max_concurrency

    async def _parallel(self, requests: list[CallRequest],
                        principal: Principal | None) -> list[CallResult]:
        tenant = principal.tenant_id if principal else "default"
        results: list[CallResult | None] = [None] * len(requests)
        sems: dict[str, asyncio.Semaphore] = {}

        async def one(i: int, req: CallRequest) -> None:
            pure, group, cap = self._group(req, tenant)
            if pure:
                results[i] = await self._call(req, principal=principal)
                return
            sem = sems.setdefault(group, asyncio.Semaphore(cap))
            async with sem:
                results[i] = await self._call(req, principal=principal)

        await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
        return [r for r in results if r is not None]
