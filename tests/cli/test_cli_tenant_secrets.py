"""The CLI opens the secrets backend ``serve`` would open on the same store (issue 8, item 4):
a ``toolkeeper call`` resolves the tenant's own credentials, so the approval it creates
reaches the tenant's webhook signed, and a tool reading a credential gets it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from pathlib import Path

import pytest
from cli_helpers import Invoke, as_json

from tests.api.identity_fixtures import Receiver, wire
from toolkeeper import Activation, Agent, Gateway, Profile, Risk, SideEffect, tool
from toolkeeper.providers.base import ToolContext
from toolkeeper.secrets.embedded import DEMO_KEY_FILE, KEY_ENV, generate_key_file
from toolkeeper.services.webhooks import SIGNATURE_HEADER, WebhookConfig, setting_key

SECRET = "whsec-0123456789abcdef"
BOUNDS_YAML = "version: 1\nsettings:\n  tenant_bounds:\n    networks: [127.0.0.0/8]\n"
"""The operator lets tenants allow-list loopback (the receiver listens there); no
``secrets:`` section, so the environment chooses the backend, as for ``serve``."""


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
async def hook_secret_known(context: ToolContext) -> dict[str, bool]:
    """Whether the tenant's credential ``hooks/hmac`` resolves to the expected value."""
    return {"matches": await context.secret("hmac", "hooks") == SECRET}


def seed(gw: Gateway, *tools: object) -> None:
    """``tools`` for agent ``bot`` (autonomy 3) and the tenant's credential ``hooks/hmac``."""
    for t in tools:
        gw.registry.register(t)
    gw.registry.put_profile(Profile(name="payer", autonomy=3, activations=tuple(
        Activation(tool=name) for name in ("wire", "hook_secret_known"))))
    gw.registry.put_agent(Agent(name="bot", profile="payer"))
    assert gw.credentials is not None, "the library gateway has no embedded secrets"
    gw.credentials.put("default", "hooks", "hmac", SECRET)


def test_an_approval_from_a_cli_call_reaches_the_webhook_signed(
        cli: Invoke, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = base64.b64encode(os.urandom(32)).decode()
    env = {"TOOLKEEPER_SECRETS_BACKEND": "embedded", KEY_ENV: key}
    monkeypatch.setenv(KEY_ENV, key)
    config = tmp_path / "bounds.yaml"
    config.write_text(BOUNDS_YAML)
    with Receiver() as rx:
        with Gateway.open(db_url, secrets="embedded") as gw:
            seed(gw, wire)
            gw.store.registry.put_setting(setting_key("default"), WebhookConfig(
                url=rx.url, secret_ref="${secret:hooks/hmac}",
                allow_networks=["127.0.0.0/8"]).model_dump())
        res = cli("call", "wire", "--agent", "bot", "--arg", "amount=5", "--config",
                  str(config), "--json", env=env)
        assert res.exit_code == 3, res.output
        approval_id = as_json(res)["approval_id"]
        # the CLI's gateway delivers what is queued (bounded) before it closes
        assert rx.arrived.wait(10), "no delivery within 10 s"
    assert len(rx.got) == 1
    got = rx.got[0]
    expected = "sha256=" + hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(got.headers[SIGNATURE_HEADER], expected)
    body = json.loads(got.body)
    assert body["event"] == "approval.created"
    assert body["approval"]["id"] == approval_id and body["approval"]["tool"] == "wire"


@pytest.mark.parametrize("source", ["env_key", "key_file_env", "demo_key_file"])
def test_a_cli_call_resolves_the_tenants_credential(
        cli: Invoke, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        source: str) -> None:
    """With no config file: ``TOOLKEEPER_SECRETS_BACKEND`` and its key (from the environment
    or a key file), or the key file a ``serve --demo`` left in the working directory."""
    monkeypatch.chdir(tmp_path)
    for var in (KEY_ENV, "TOOLKEEPER_SECRETS_KEY_FILE", "TOOLKEEPER_SECRETS_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    key_file = DEMO_KEY_FILE.resolve() if source == "demo_key_file" else tmp_path / "m.key"
    key = generate_key_file(key_file)
    env = {"env_key": {
        "TOOLKEEPER_SECRETS_BACKEND": "embedded", KEY_ENV: base64.b64encode(key).decode()},
        "key_file_env": {"TOOLKEEPER_SECRETS_BACKEND": "embedded",
                         "TOOLKEEPER_SECRETS_KEY_FILE": str(key_file)},
        "demo_key_file": {}}[source]
    with Gateway.open(db_url, secrets="embedded", secrets_key_file=key_file) as gw:
        seed(gw, hook_secret_known)
    res = cli("call", "hook_secret_known", "--agent", "bot", "--json", env=env)
    assert res.exit_code == 0, res.output
    assert as_json(res)["output"] == {"matches": True}
