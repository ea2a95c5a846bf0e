"""One rendering of an approval (issue 29 item 1): REST's answer (``ApprovalOut``), a webhook
delivery's ``approval`` (``services.approvals.approval_json``), the CLI's ``--json`` and what
the client reads are the same object, made from the one wire model (``model/wire.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient
from toolkeeper.api.responses import ApprovalOut, EnabledToolOut, UnavailableToolOut
from toolkeeper.cli import app
from toolkeeper.client import Approval
from toolkeeper.model import wire
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.services.approvals import approval_json


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def _cli_json(db_url: str, *args: str) -> object:
    runner = CliRunner(env={"TOOLKEEPER_TOKEN": None, "TOOLKEEPER_DATABASE_URL": None,
                            "TOOLKEEPER_TENANT": None, "TOOLKEEPER_CONFIG": None})
    res = runner.invoke(app, ["--db", db_url, "approvals", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_rest_the_webhook_the_cli_and_the_client_render_an_approval_alike(
        api: RestClient, db_url: str) -> None:
    asked = api.execute("intern", "email", {"to": "ann@example.com"}, action="send").json()
    assert asked["status"] == "confirmation_required"
    approval_id = asked["approval_id"]
    rest = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver")).json()
    assert rest["preview"]["data"] == {"to": "ann@example.com"}  # nested, and rendered

    assert _cli_json(db_url, "list") == [rest]
    assert approval_json(api.gw.approvals.get(approval_id, "default")) == rest  # webhooks'
    assert Approval.model_validate(rest).model_dump(mode="json") == rest  # the client's

    approver = api.gw.store.tokens.create(tenant_id="default", role="approver")[1]
    decided = _cli_json(db_url, "deny", approval_id, "--note", "not today", "--token",
                        approver)
    after = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver")).json()
    assert decided == after and (after["status"], after["note"]) == ("denied", "not today")


def test_the_rest_schema_has_the_wire_models_fields() -> None:
    """``ApprovalOut`` narrows the wire model (enums, no extra fields), never adds to it:
    the OpenAPI document, the client and the CLI describe one object."""
    assert list(ApprovalOut.model_fields) == list(wire.Approval.model_fields)
    schema = ApprovalOut.model_json_schema(mode="serialization")
    assert set(schema["properties"]) == set(wire.Approval.model_fields)
    assert set(schema["required"]) == set(wire.Approval.model_fields)


def test_the_discovery_schemas_are_the_wire_models_narrowed() -> None:
    """The listings' tools too: the client reads them with the wire models, the server's
    schemas narrow their values to its enums."""
    for out, model in ((EnabledToolOut, wire.EnabledTool),
                       (UnavailableToolOut, wire.UnavailableTool)):
        assert list(out.model_fields) == list(model.model_fields)
        assert out.model_fields["side_effect"].annotation is SideEffect
        assert out.model_fields["risk_default"].annotation is Risk
    assert set(wire.DiscoveredTool.model_fields) == \
        set(wire.EnabledTool.model_fields) | set(wire.UnavailableTool.model_fields)


def test_an_audit_event_travels_with_every_field_the_store_keeps() -> None:
    """The store's event (a dataclass on the write path) and the wire's (REST, the client)
    are two classes by design: a field added to one must be added to the other."""
    import dataclasses

    from toolkeeper.store.records import AuditEvent

    assert [f.name for f in dataclasses.fields(AuditEvent)] == list(wire.AuditEvent.model_fields)
