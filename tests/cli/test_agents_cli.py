"""``toolkeeper agents`` and agent endpoints in config: register, show, remove an endpoint;
a literal credential in a header and a network beyond the operator's ceiling are refused
with their reasons; a config file's endpoint is stored as the operator's (origin config)."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import Invoke, as_json

from toolkeeper.model.profile import agent_id


def test_endpoint_set_show_list_remove(cli: Invoke, demo_store: str) -> None:
    res = cli("agents", "endpoint-set", "billing-bot", "--url", "https://agents.example/b",
              "--transport", "a2a", "--status", "published", "--header",
              "Authorization=Bearer ${secret:bots/token}", "--token", demo_store, "--json")
    assert res.exit_code == 0, res.output
    shown = as_json(cli("agents", "endpoint-show", "billing-bot", "--json"))
    assert shown["agent_id"] == agent_id("default", "billing-bot")
    assert (shown["transport"], shown["status"], shown["origin"]) == ("a2a", "published", "api")
    listed = {a["name"]: a for a in as_json(cli("agents", "list", "--json"))}
    assert listed["billing-bot"]["url"] == "https://agents.example/b"
    assert "url" not in listed["janitor-bot"]
    assert cli("agents", "endpoint-remove", "billing-bot", "--token", demo_store).exit_code == 0
    gone = cli("agents", "endpoint-show", "billing-bot")
    assert gone.exit_code == 1 and "not_found" in gone.output


def test_endpoint_refusals(cli: Invoke, demo_store: str) -> None:
    literal = cli("agents", "endpoint-set", "billing-bot", "--url", "https://a.example/",
                  "--header", "Authorization=hunter2", "--token", demo_store)
    assert literal.exit_code == 1 and "secret_literal_refused" in literal.output
    private = cli("agents", "endpoint-set", "billing-bot", "--url", "http://10.0.0.5/",
                  "--network", "10.0.0.0/8", "--token", demo_store)
    assert private.exit_code == 1 and "policy_exceeds_bounds" in private.output
    nobody = cli("agents", "endpoint-set", "billing-bot", "--url", "https://a.example/")
    assert nobody.exit_code == 1 and "unauthenticated" in nobody.output
    assert cli("agents", "endpoint-show", "billing-bot").exit_code == 1


def test_config_agent_endpoint_is_the_operators(cli: Invoke, demo_store: str,
                                                tmp_path: Path) -> None:
    config = tmp_path / "agents.yaml"
    config.write_text(
        "version: 1\n"
        "profiles:\n  - {name: p, tenant_id: default}\n"
        "agents:\n  - name: helper\n    profile: p\n    endpoint:\n"
        "      {transport: http, url: 'http://10.1.2.3/run', status: published,\n"
        "       allowed_networks: [10.1.2.0/24]}\n")
    res = cli("apply", "-f", str(config))
    assert res.exit_code == 0, res.output
    shown = as_json(cli("agents", "endpoint-show", "helper", "--json"))
    assert (shown["origin"], shown["allowed_networks"]) == ("config", ["10.1.2.0/24"])
    config.write_text(config.read_text().replace(
        "status: published", "status: published, headers: {X-Key: plain}"))
    bad = cli("apply", "-f", str(config))  # refused by the check rules before any write
    assert bad.exit_code == 2 and "headers.X-Key" in bad.output and "plain" not in bad.output


def test_check_reports_a_literal_credential_in_an_endpoint_header(
        cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "agents.yaml"
    config.write_text(
        "version: 1\n"
        "profiles:\n  - {name: p, tenant_id: default}\n"
        "agents:\n  - name: helper\n    profile: p\n    endpoint:\n"
        "      transport: http\n      url: 'ftp://agents.example/run'\n"
        "      headers: {Authorization: 'Bearer hunter2'}\n")
    res = cli("check", "-f", str(config))
    assert res.exit_code != 0
    assert "secret_literal_refused" in res.output and "hunter2" not in res.output
    assert "invalid_definition" in res.output and "agents[0].endpoint.url" in res.output


def test_apply_with_one_bad_endpoint_writes_nothing(cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "agents.yaml"
    config.write_text(
        "version: 1\n"
        "profiles:\n  - {name: p, tenant_id: default}\n"
        "agents:\n"
        "  - {name: good, profile: p, endpoint: {transport: http, url: 'https://a.example/'}}\n"
        "  - {name: bad, profile: p, endpoint: {transport: http, url: 'https://b.example/',\n"
        "     headers: {X-Key: plain}}}\n")
    res = cli("apply", "-f", str(config))
    assert res.exit_code == 2 and "agents[1].endpoint.headers.X-Key" in res.output
    assert as_json(cli("agents", "list", "--json")) == []
