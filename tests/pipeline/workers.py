"""Process entry points for multi-process tests (importable by ``spawn`` children)."""

from __future__ import annotations

import concurrent.futures as cf
from datetime import timedelta
from typing import Any

from toolkeeper import Gateway
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.store import Store


def open_gateway(url: str, **settings: Any) -> Gateway:
    """A gateway on an already-configured store (no definition writes)."""
    return Gateway(Store.open(url, migrate=False), settings=Settings(**settings))


def call_many(url: str, tool: str, arguments: dict[str, Any], key: str, threads: int,
              start: Any) -> list[tuple[str, str | None, bool]]:
    """``threads`` simultaneous identical calls once ``start`` (a barrier) lets them go;
    returns (status, reason, deduped) each."""
    gw = open_gateway(url)
    try:
        start.wait(timeout=120)  # a barrier: every caller's gateway is open before any calls
        with cf.ThreadPoolExecutor(threads) as pool:
            futs = [pool.submit(gw.call_sync, tool, arguments=arguments, agent="bot",
                                idempotency_key=key) for _ in range(threads)]
            out = []
            for f in futs:
                r = f.result(timeout=120)
                out.append((r.status.value, None if r.reason is None else str(r.reason),
                            r.deduped))
            return out
    finally:
        gw.close()


def call_and_hang(url: str, marker: str, key: str) -> None:
    """Start an irreversible call that hangs; the parent SIGKILLs this process."""
    gw = open_gateway(url, stale_grace=timedelta(0))
    gw.call_sync("hang_charge", arguments={"invoice": "inv-9", "marker": marker}, agent="bot",
                 idempotency_key=key)
