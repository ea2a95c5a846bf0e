"""A budget reaching its warning threshold is delivered, signed, to the tenant's webhook as
``budget.warning`` (docs/guides/budgets.md), from the library face, once a period."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from tests.api.identity_fixtures import Receiver
from tests.api.test_webhook_every_face import SECRET, open_gateway
from tests.pipeline.sample_tools import add
from toolkeeper import Activation, Agent, Limits, Profile
from toolkeeper.model.profile import Budget
from toolkeeper.services.webhooks import SIGNATURE_HEADER, WebhookConfig, setting_key


def test_a_budget_warning_is_delivered_to_the_webhook_once(tmp_path: Path) -> None:
    gw = open_gateway(tmp_path)
    with gw, Receiver() as rx:
        gw.registry.register(add)
        gw.registry.put_profile(Profile(
            name="p", autonomy=3, activations=(Activation(tool="add"),),
            limits=Limits(budgets=(Budget(name="adds", per="agent", max_calls=4,
                                          warn_at=0.5),))))
        gw.registry.put_agent(Agent(name="bot", profile="p"))
        assert gw.credentials is not None
        gw.credentials.put("default", "hooks", "hmac", SECRET)
        gw.store.registry.put_setting(setting_key("default"), WebhookConfig(
            url=rx.url, secret_ref="${secret:hooks/hmac}",
            allow_networks=["127.0.0.0/8"]).model_dump())
        calls = [gw.call_sync("add", arguments={"a": 1, "b": i}, agent="bot")
                 for i in range(3)]
        assert all(c.ok for c in calls)
        assert rx.arrived.wait(10), "no delivery within 10 s"
        assert gw.webhooks.wait_idle(10)
    assert len(rx.got) == 1  # the third call charged past the threshold: no second warning
    got = rx.got[0]
    expected = "sha256=" + hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(got.headers[SIGNATURE_HEADER], expected)
    body = json.loads(got.body)
    assert body["event"] == "budget.warning" and body["tenant_id"] == "default"
    assert body["budget"]["budget"] == "adds" and body["budget"]["calls"] == 2
    assert body["budget"]["call_id"] == calls[1].call_id and body["budget"]["resets_at"]
