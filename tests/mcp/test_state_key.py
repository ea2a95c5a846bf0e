"""The requestState key is one per store, whoever creates it first (SPEC §12 replicas)."""

from __future__ import annotations

import threading

from toolkeeper import Gateway
from toolkeeper.mcp.state import state_key


def test_racing_gateways_share_one_key(db_url: str) -> None:
    gateways = [Gateway.open(db_url) for _ in range(4)]
    try:
        keys: list[bytes] = []
        start = threading.Barrier(len(gateways))

        def create(gw: Gateway) -> None:
            start.wait(timeout=10)
            keys.append(state_key(gw))

        threads = [threading.Thread(target=create, args=(gw,)) for gw in gateways]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(keys) == 4 and len(set(keys)) == 1 and len(keys[0]) == 32
        assert state_key(gateways[0]) == keys[0]  # stable once created
    finally:
        for gw in gateways:
            gw.close()
