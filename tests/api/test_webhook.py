"""Approval webhooks per tenant: signed deliveries to a real loopback receiver, retries, the
bounded queue, the SSRF guard — and never a failed or blocked call (SPEC §3, §8)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.identity_fixtures import Receiver, identity_api
from tests.support.rest import RestClient
from toolkeeper.bounds import TenantBounds
from toolkeeper.services.webhooks import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookConfig,
    WebhookNotifier,
    setting_key,
)

SECRET = "whsec-0123456789abcdef"
LOOPBACK = ["127.0.0.0/8"]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestClient]:
    with identity_api(tmp_path) as api:
        yield api


@pytest.fixture
def notifier(api: RestClient) -> WebhookNotifier:
    n = api.gw.webhooks  # the gateway's own: every approval notifies
    n.timeout_s, n.backoff_s = 2.0, 0.01
    return n


def set_hook(api: RestClient, url: str, allow: list[str] | None = LOOPBACK) -> None:
    r = api.call("PUT", "/settings/webhook",
                 json={"url": url, "secret": SECRET, "allow_networks": allow or []})
    assert r.status_code == 200, r.text


def needs_approval(api: RestClient) -> str:
    started = time.monotonic()
    r = api.call("POST", "/tools/execute", "agent",
                 json={"tool": "wire", "arguments": {"amount": 5}})
    assert time.monotonic() - started < 2.0
    # critical at autonomy 3: the agent's user confirms (an approval of kind confirm)
    assert r.status_code == 200 and r.json()["status"] == "confirmation_required", r.text
    return str(r.json()["approval_id"])


def test_a_new_approval_is_posted_signed_to_the_tenants_webhook(
        api: RestClient, notifier: WebhookNotifier) -> None:
    with Receiver() as rx:
        set_hook(api, rx.url)
        approval_id = needs_approval(api)
        assert notifier.wait_idle(10)
    assert len(rx.got) == 1
    got = rx.got[0]
    expected = "sha256=" + hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(got.headers[SIGNATURE_HEADER], expected)
    body = json.loads(got.body)
    assert body["event"] == "approval.created" and body["tenant_id"] == "default"
    assert body["approval"]["id"] == approval_id and body["approval"]["tool"] == "wire"
    assert got.headers[TIMESTAMP_HEADER] == body["timestamp"]
    assert abs(int(body["timestamp"]) - time.time()) < 60
    assert notifier.recent[-1].ok and notifier.recent[-1].attempts == 1


def test_the_delivered_approval_is_what_rest_shows(
        api: RestClient, notifier: WebhookNotifier) -> None:
    """The webhook's ``approval`` and ``GET /approvals/{id}`` say the same, field by field."""
    with Receiver() as rx:
        set_hook(api, rx.url)
        approval_id = needs_approval(api)
        assert notifier.wait_idle(10)
    delivered = json.loads(rx.got[0].body)["approval"]
    shown = api.call("GET", f"/approvals/{approval_id}", "approver")
    assert shown.status_code == 200, shown.text
    assert delivered == shown.json()


def test_another_tenants_approvals_are_not_sent_to_this_webhook(
        api: RestClient, notifier: WebhookNotifier) -> None:
    with Receiver() as rx:
        set_hook(api, rx.url)
        r = api.call("POST", "/tools/execute", "other_agent",
                     json={"tool": "wire", "arguments": {"amount": 1}})
        assert r.json()["status"] == "confirmation_required"
        assert notifier.wait_idle(10)
    assert rx.got == []


def test_a_failing_receiver_is_retried_three_times_and_never_fails_the_call(
        api: RestClient, notifier: WebhookNotifier) -> None:
    with Receiver(statuses=[500, 503, 502, 500, 500]) as rx:
        set_hook(api, rx.url)
        needs_approval(api)
        assert notifier.wait_idle(10)
    assert len(rx.got) == 4  # one try and three retries
    assert not notifier.recent[-1].ok and notifier.recent[-1].error == "HTTP 500"


def test_a_receiver_that_recovers_gets_the_event(api: RestClient,
                                                 notifier: WebhookNotifier) -> None:
    with Receiver(statuses=[503]) as rx:
        set_hook(api, rx.url)
        needs_approval(api)
        assert notifier.wait_idle(10)
    assert len(rx.got) == 2 and rx.got[0].body == rx.got[1].body
    assert notifier.recent[-1].ok and notifier.recent[-1].attempts == 2


def test_a_loopback_url_without_allow_list_is_refused_when_set(api: RestClient) -> None:
    r = api.call("PUT", "/settings/webhook", json={"url": "http://127.0.0.1:9/hook",
                                                   "secret": SECRET})
    assert r.status_code == 422 and r.json()["error"]["reason"] == "address_not_allowed"
    assert api.call("GET", "/settings/webhook").status_code == 404


REFUSED_SPELLINGS = [
    # names for loopback, as a resolver or RFC 6761 gives them
    "localhost", "LOCALHOST", "localhost.", "LocalHost..", "hook.localhost", "a.b.LOCALHOST.",
    # IPv4 forms getaddrinfo (inet_aton) reads as 127.0.0.1
    "127.1", "127.0.1", "2130706433", "0x7f000001", "0x7F000001", "0x7f.1", "0x7f.0.0.1",
    "017700000001", "0177.0.0.1", "127.000.000.001", "127.0.0.1.", "127.255.255.254",
    # IPv6 forms of loopback, plain or embedding it
    "[::1]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:7f00:1]", "[::127.0.0.1]", "[64:ff9b::7f00:1]",
    # the unspecified address (reaches local listeners) and private / metadata addresses
    "0", "0.0.0.0", "[::]", "10.0.0.1", "167772161", "0xa000001", "192.168.1.1",
    "3232235777", "169.254.169.254", "2852039166", "0xa9fea9fe", "[fe80::1]", "[fd00::1]",
    "100.64.0.1", "metadata.google.internal", "METADATA.google.internal.",
]


def webhook_answer(api: RestClient, host: str,
                   allow: list[str] | None = None) -> tuple[int, str | None]:
    r = api.call("PUT", "/settings/webhook", json={
        "url": f"http://{host}:9/hook", "secret": SECRET, "allow_networks": allow or []})
    return r.status_code, r.json()["error"]["reason"] if r.status_code != 200 else None


@pytest.mark.parametrize("host", REFUSED_SPELLINGS)
def test_every_spelling_of_a_refused_address_is_refused_when_set(api: RestClient,
                                                                   host: str) -> None:
    """Refused at write time with the guard's reason, as delivery would refuse it: the
    admin is told now, not by a log line at the first approval."""
    assert webhook_answer(api, host) == (422, "address_not_allowed")
    assert api.call("GET", "/settings/webhook").status_code == 404


@pytest.mark.parametrize("host", ["localhost", "localhost.", "127.1", "2130706433",
                                  "0x7f000001", "[::ffff:127.0.0.1]", "hook.localhost"])
def test_a_loopback_spelling_is_accepted_once_loopback_is_listed(api: RestClient,
                                                                  host: str) -> None:
    assert webhook_answer(api, host, LOOPBACK) == (200, None)


def test_an_ipv6_loopback_needs_its_own_network_listed(tmp_path: Path) -> None:
    bounds = TenantBounds(networks=("127.0.0.0/8", "::1/128"))
    with identity_api(tmp_path, tenant_bounds=bounds) as api:
        assert webhook_answer(api, "[::1]", LOOPBACK) == (422, "address_not_allowed")
        assert webhook_answer(api, "[::1]", ["::1/128"]) == (200, None)
        assert webhook_answer(api, "localhost", ["::1/128"]) == (422, "address_not_allowed")


def test_a_public_address_and_an_unresolvable_name_are_accepted(api: RestClient) -> None:
    assert webhook_answer(api, "93.184.216.34") == (200, None)
    assert webhook_answer(api, "hooks.invalid") == (200, None)  # delivery checks again


def test_the_write_time_check_catches_a_spelling_only_by_resolving_it(
        api: RestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken (the URL checked as text only, numeric spellings read as names, as
    before): ``127.1`` and ``2130706433`` are accepted again, so the spelling tests above
    would fail."""
    from toolkeeper import netguard
    from toolkeeper.netguard import NetGuard

    async def text_only(self: NetGuard, url: str, timeout_s: float = 5.0) -> object:
        return self.check_url(url)

    monkeypatch.setattr(NetGuard, "check_destination", text_only)
    monkeypatch.setattr(netguard, "numeric_ipv4", lambda host: None)
    assert webhook_answer(api, "127.1") == (200, None)
    assert webhook_answer(api, "2130706433") == (200, None)


def test_a_name_resolving_to_loopback_is_refused_at_delivery_without_allow_list(
        api: RestClient, notifier: WebhookNotifier) -> None:
    with Receiver() as rx:
        set_hook(api, f"http://localhost:{rx.port}/hook")  # stored while loopback was listed
        raw = api.gw.store.registry.get_setting(setting_key("default"))
        api.gw.store.registry.put_setting(setting_key("default"),
                                          {**raw, "allow_networks": []})
        needs_approval(api)
        assert notifier.wait_idle(10)
    assert rx.got == []
    last = notifier.recent[-1]
    assert not last.ok and last.error == "address_not_allowed" and last.attempts == 1


def test_the_queue_is_bounded_and_drops_when_full(api: RestClient) -> None:
    approval_id = needs_approval(api)
    rec = api.gw.approvals.get(approval_id, "default")
    idle = WebhookNotifier(setting=api.gw.store.registry.get_setting, secrets=lambda _: None,
                           bounds=TenantBounds(), queue_size=2)  # not started: never drains
    for _ in range(5):
        idle.submit(rec)
    assert idle.dropped == 3
    assert not idle.wait_idle(0.05)


def test_the_webhook_setting_is_admin_only_and_never_shows_the_secret(api: RestClient) -> None:
    set_hook(api, "https://hooks.example.com/toolkeeper", allow=None)
    r = api.call("GET", "/settings/webhook")
    assert r.json()["url"] == "https://hooks.example.com/toolkeeper"
    assert SECRET not in r.text and r.json()["secret_ref"].startswith("${secret:")
    assert api.call("GET", "/credentials").json() == []  # not reachable as a credential
    for who in ("operator", "approver", "agent"):
        assert api.call("GET", "/settings/webhook", who).status_code == 403
    assert api.call("GET", "/settings/webhook", "other_admin").status_code == 404
    assert api.call("DELETE", "/settings/webhook").status_code == 204
    assert api.call("GET", "/settings/webhook").status_code == 404


@pytest.mark.parametrize("body", [
    {"url": "https://h.example.com", "secret": SECRET, "secret_ref": "${secret:a/b}"},
    {"url": "https://h.example.com"},
    {"url": "https://h.example.com", "secret_ref": "plain"},
    {"url": "ftp://h.example.com", "secret": SECRET},
])
def test_a_bad_webhook_setting_is_refused(api: RestClient, body: dict[str, str]) -> None:
    assert api.call("PUT", "/settings/webhook", json=body).status_code == 422


def test_the_webhook_secret_is_the_tenants_own_credential(
        api: RestClient, notifier: WebhookNotifier) -> None:
    with Receiver() as rx:
        set_hook(api, rx.url)
        assert api.gw.credentials is not None
        assert api.gw.credentials.get("default", "webhooks", "default/hmac") == SECRET
        assert api.gw.credentials.get("other", "webhooks", "default/hmac") is None
        needs_approval(api)
        assert notifier.wait_idle(10)
    assert len(rx.got) == 1 and notifier.recent[-1].ok


@pytest.mark.parametrize("ref", ["${secret:platform/key}", "${secret:theirs/key}"])
def test_a_webhook_secret_ref_reaches_only_the_tenants_own_credentials(
        api: RestClient, notifier: WebhookNotifier, ref: str) -> None:
    store = api.gw.runtime.secrets
    assert store is not None and hasattr(store, "set_secret")
    store.set_secret("platform", "key", "operator-platform-hmac-key")
    r = api.call("PUT", "/credentials/theirs/key", "other_admin",
                 json={"value": "other-tenants-hmac-key"})
    assert r.status_code == 204
    with Receiver() as rx:
        r = api.call("PUT", "/settings/webhook", json={
            "url": rx.url, "secret_ref": ref, "allow_networks": LOOPBACK})
        assert r.status_code == 200, r.text
        needs_approval(api)
        assert notifier.wait_idle(10)
    assert rx.got == []  # never signed with a key the tenant does not own
    assert notifier.recent[-1].error == "secret_not_found"


@pytest.mark.parametrize("operator", [(), ("0.0.0.0/0",), ("10.0.0.0/8",)])
def test_allow_networks_beyond_the_operators_ceiling_are_refused_when_set(
        tmp_path: Path, operator: tuple[str, ...]) -> None:
    with identity_api(tmp_path, tenant_bounds=TenantBounds(networks=operator)) as api:
        r = api.call("PUT", "/settings/webhook", json={
            "url": "http://127.0.0.1:9/hook", "secret": SECRET,
            "allow_networks": ["10.1.0.0/16", "127.0.0.0/8"]})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["reason"] == "policy_exceeds_bounds"
        pointers = [e["pointer"] for e in err["details"]["errors"]]
        # 10.1.0.0/16 lies in either operator network; loopback in neither, even 0.0.0.0/0
        assert pointers == (["/allow_networks/1"] if operator
                            else ["/allow_networks/0", "/allow_networks/1"])
        assert api.call("GET", "/settings/webhook").status_code == 404


def test_a_stored_webhook_beyond_the_ceiling_is_not_delivered(tmp_path: Path) -> None:
    with identity_api(tmp_path, tenant_bounds=TenantBounds()) as api, Receiver() as rx:
        notifier = api.gw.webhooks
        api.gw.store.registry.put_setting(setting_key("default"), WebhookConfig(
            url=rx.url, secret_ref="${secret:webhooks/default/hmac}",
            allow_networks=LOOPBACK).model_dump())
        needs_approval(api)
        assert notifier.wait_idle(10)
    assert rx.got == []
    last = notifier.recent[-1]
    assert (last.ok, last.error, last.attempts) == (False, "policy_exceeds_bounds", 0)
