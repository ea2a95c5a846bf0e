"""Approval webhooks are the gateway's service (issue 8, item 4): an approval created through
the library — no ``serve``, no REST app — is delivered, signed, to the tenant's webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from tests.api.identity_fixtures import Receiver, wire
from toolkeeper import Activation, Agent, Gateway, Profile
from toolkeeper.model.enums import CallStatus
from toolkeeper.secrets.embedded import generate_key_file
from toolkeeper.services.webhooks import SIGNATURE_HEADER, WebhookConfig, setting_key

SECRET = "whsec-0123456789abcdef"


def open_gateway(tmp_path: Path) -> Gateway:
    """A library gateway with embedded secrets; tenants may allow-list loopback."""
    generate_key_file(tmp_path / "secrets.key")
    return Gateway.open(f"sqlite:///{tmp_path}/lib.db", secrets="embedded",
                        secrets_key_file=tmp_path / "secrets.key",
                        tenant_bounds={"networks": ["127.0.0.0/8"]})


def hooked(gw: Gateway, url: str) -> None:
    """A critical ``wire`` tool for agent ``bot``, and the tenant's webhook at ``url``."""
    gw.registry.register(wire)
    gw.registry.put_profile(Profile(name="payer", autonomy=3,
                                    activations=(Activation(tool="wire"),)))
    gw.registry.put_agent(Agent(name="bot", profile="payer"))
    assert gw.credentials is not None
    gw.credentials.put("default", "hooks", "hmac", SECRET)
    gw.store.registry.put_setting(setting_key("default"), WebhookConfig(
        url=url, secret_ref="${secret:hooks/hmac}",
        allow_networks=["127.0.0.0/8"]).model_dump())


def test_an_approval_created_through_the_library_is_delivered(tmp_path: Path) -> None:
    gw = open_gateway(tmp_path)
    with gw, Receiver() as rx:
        hooked(gw, rx.url)
        res = gw.call_sync("wire", arguments={"amount": 5}, agent="bot")
        assert res.status is CallStatus.CONFIRMATION_REQUIRED, res
        assert rx.arrived.wait(10), "no delivery within 10 s"
    assert len(rx.got) == 1
    got = rx.got[0]
    expected = "sha256=" + hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(got.headers[SIGNATURE_HEADER], expected)
    body = json.loads(got.body)
    assert body["event"] == "approval.created"
    assert body["approval"]["id"] == res.approval_id and body["approval"]["tool"] == "wire"


def test_closing_the_gateway_delivers_what_is_queued_first(tmp_path: Path) -> None:
    """A short-lived face (the CLI) opens, calls and closes at once: the event still goes."""
    gw = open_gateway(tmp_path)
    with Receiver() as rx:
        with gw:
            hooked(gw, rx.url)
            res = gw.call_sync("wire", arguments={"amount": 5}, agent="bot")
        # closed right after the call: close() drained the queue (bounded) before stopping
        assert len(rx.got) == 1
    assert json.loads(rx.got[0].body)["approval"]["id"] == res.approval_id
