"""The one rule for host-touching tenant values (``toolkeeper.bounds``): narrow within the
operator's ceiling, never widen; special ranges only when the operator lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from toolkeeper.bounds import (
    CommandBound,
    HostCommand,
    HostNetworks,
    HostPath,
    TenantBounds,
    activation_excess,
    excess,
    host_fields,
)
from toolkeeper.builtins import definition
from toolkeeper.builtins.filesystem import FilesystemPolicy
from toolkeeper.builtins.git import GitPolicy
from toolkeeper.builtins.http_request import HttpRequestPolicy
from toolkeeper.builtins.mcp_call import McpCallPolicy
from toolkeeper.builtins.shell import ShellPolicy
from toolkeeper.builtins.web_fetch import WebFetchPolicy
from toolkeeper.providers.http import HttpEndpointConfig
from toolkeeper.services.webhooks import WebhookConfig


def test_the_host_touching_fields_are_declared_on_their_models() -> None:
    assert {n: type(m) for n, m in host_fields(GitPolicy).items()} == {"repo_root": HostPath}
    for model, name in ((HttpRequestPolicy, "allowed_networks"),
                        (HttpEndpointConfig, "allowed_networks"),
                        (WebhookConfig, "allow_networks")):
        assert {n: type(m) for n, m in host_fields(model).items()} == {name: HostNetworks}


@pytest.mark.parametrize(("tenant", "operator", "ok"), [
    ("10.1.0.0/16", ["10.0.0.0/8"], True),
    ("10.0.0.0/8", ["10.0.0.0/8"], True),
    ("10.0.0.0/7", ["10.0.0.0/8"], False),
    ("192.168.1.0/24", ["10.0.0.0/8"], False),
    ("10.1.0.0/16", [], False),
    ("127.0.0.1/32", ["0.0.0.0/0"], False),
    ("127.0.0.1/32", ["0.0.0.0/0", "127.0.0.0/8"], True),
    ("0.0.0.0/32", ["0.0.0.0/0"], False),
    ("0.0.0.0/0", ["0.0.0.0/0", "127.0.0.0/8"], False),
    ("169.254.0.0/17", ["169.254.0.0/16"], True),
    ("169.254.0.0/16", ["169.254.0.0/16"], False),  # holds the metadata endpoint
    ("169.254.169.254/32", ["169.254.0.0/16"], False),
    ("169.254.169.254/32", ["169.254.169.254/32"], True),
    ("168.63.129.16/32", ["0.0.0.0/0"], False),
    ("100.100.100.0/24", ["100.64.0.0/10"], False),
    ("::1/128", ["::/0"], False),
    ("::1/128", ["::1/128"], True),
    ("::ffff:127.0.0.1/128", ["::/0"], False),
    ("::ffff:127.0.0.1/128", ["::ffff:127.0.0.0/104"], True),
    ("fe80::/64", ["::/0"], False),
    ("fd00:ec2::254/128", ["fc00::/7"], False),
    ("fd12::/16", ["fc00::/7"], True),
    ("10.0.0.0/8", ["::/0"], False),
    ("not-a-net", ["0.0.0.0/0"], False),
])
def test_a_tenant_network_is_a_subnet_of_an_operator_network(
        tenant: str, operator: list[str], ok: bool) -> None:
    assert (HostNetworks().outside(tenant, operator) is None) is ok


def test_a_tenant_path_is_the_operators_or_below_after_resolving(tmp_path: Path) -> None:
    root, other = tmp_path / "srv", tmp_path / "other"
    (root / "a").mkdir(parents=True)
    other.mkdir()
    (root / "link").symlink_to(other, target_is_directory=True)
    rule, ceiling = HostPath(), [str(root / "a" / "..")]
    assert rule.outside(str(root), ceiling) is None
    assert rule.outside(str(root / "a" / "not-yet"), ceiling) is None
    for path in (str(other), str(root / ".." / "other"), str(root / "link"), "/", "x\0y"):
        assert rule.outside(path, ceiling) is not None, path
    assert rule.outside(str(root), []) is not None


def test_a_tenant_command_is_one_the_operator_lists() -> None:
    assert HostCommand().outside("git", ["git", "ls"]) is None
    assert HostCommand().outside("/bin/sh", ["git"]) is not None


def test_excess_points_at_each_value_and_counts_the_operators_own(tmp_path: Path) -> None:
    bounds = TenantBounds(networks=("10.0.0.0/8",))
    found = excess(HttpRequestPolicy, {"allowed_networks": ["10.2.0.0/16", "127.0.0.1/32",
                                                            "172.16.0.0/12"]},
                   bounds, operator={"allowed_networks": ["172.16.0.0/12"]}, at="/policy")
    assert [e.pointer for e in found] == ["/policy/allowed_networks/1"]
    found = excess(GitPolicy, {"repo_root": 7}, TenantBounds(paths=(str(tmp_path),)))
    assert [(e.pointer, e.message) for e in found] == [("/repo_root",
                                                        "repo_root: must be a string")]
    assert excess(GitPolicy, {"max_files": 3}, TenantBounds()) == []


# narrowing markers (issue 26, items 5-7) ------------------------------------------------

def _pointers(model: type[BaseModel], mine: dict[str, Any], theirs: dict[str, Any] | None,
              bounds: TenantBounds | None = None) -> list[str]:
    return [e.pointer for e in excess(model, mine, bounds or TenantBounds(), operator=theirs)]


def test_host_lists_narrow_under_wildcards_and_open_values_stay_the_operators() -> None:
    theirs = {"allowed_hosts": ["*.example.com"], "allowed_ports": [443]}
    assert _pointers(HttpRequestPolicy, {"allowed_hosts": ["api.example.com",
                                                           "*.eu.example.com"]}, theirs) == []
    assert _pointers(HttpRequestPolicy, {"allowed_hosts": ["example.com", "evil.com"]},
                     theirs) == ["/allowed_hosts/0", "/allowed_hosts/1"]
    assert _pointers(HttpRequestPolicy, {"allowed_hosts": []}, theirs) == ["/allowed_hosts"]
    assert _pointers(HttpRequestPolicy, {"allowed_ports": None}, theirs) == ["/allowed_ports"]
    assert _pointers(HttpRequestPolicy, {"allowed_methods": ["get"]},
                     {"allowed_methods": ["GET"]}) == []
    assert _pointers(McpCallPolicy, {"allowed_tools": ["crm/find", "crm/*"]},
                     {"allowed_tools": ["crm/*"]}) == []
    assert _pointers(McpCallPolicy, {"allowed_tools": ["crmx/find"]},
                     {"allowed_tools": ["crm/*"]}) == ["/allowed_tools/0"]
    # a tenant's own tool: no operator value to narrow, the model's limits apply
    assert _pointers(HttpRequestPolicy, {"allowed_hosts": [], "timeout_s": 300}, None) == []


def test_a_command_rule_lies_within_one_operator_rule_for_its_program() -> None:
    theirs = {"commands": {"a": {"path": "/usr/bin/tar", "flags": ["-t"], "max_args": 2},
                           "b": {"path": "/usr/bin/tar", "positional": ["x"], "max_args": 2}}}
    ok = {"commands": {"t": {"path": "/usr/bin/tar", "positional": ["x"], "max_args": 1}}}
    assert _pointers(ShellPolicy, ok, theirs) == []
    mixed = {"commands": {"t": {"path": "/usr/bin/tar", "flags": ["-t"],
                                "positional": ["x"], "max_args": 2}}}
    assert len(_pointers(ShellPolicy, mixed, theirs)) == 1  # within neither rule alone
    unset = {"commands": {"t": {"path": "/usr/bin/tar"}}}  # max_args 16 by default
    assert _pointers(ShellPolicy, unset, theirs) == ["/commands/t/max_args"]
    subcommands = {"commands": {"g": {"path": "/usr/bin/tar", "subcommands": ["x"],
                                      "max_args": 1}}}
    assert _pointers(ShellPolicy, subcommands, theirs) == ["/commands/g/subcommands"]


def test_a_bare_command_path_in_the_ceiling_admits_the_program_without_arguments() -> None:
    bounds = TenantBounds.model_validate({"commands": [
        "/usr/bin/true", {"path": "/usr/bin/ls", "flags": ["-l"], "max_args": 1}]})
    assert bounds.command_rules[0] == CommandBound(path="/usr/bin/true")
    assert HostCommand().outside("/usr/bin/ls", bounds.ceiling(HostCommand())) is None
    rules = {"commands": {"t": {"path": "/usr/bin/true", "max_args": 0},
                          "l": {"path": "/usr/bin/ls", "flags": ["-l"], "max_args": 1}}}
    assert _pointers(ShellPolicy, rules, None, bounds) == []
    wider = {"commands": {"t": {"path": "/usr/bin/true", "flags": ["-l"]}}}
    assert _pointers(ShellPolicy, wider, None, bounds) == ["/commands/t/flags/0"]
    for bad in (["ls"], [""], [{"path": "/bin/ls", "flags": ["("]}], [{"path": "/bin/ls",
                                                                        "flag": ["-l"]}]):
        with pytest.raises(ValidationError):
            TenantBounds.model_validate({"commands": bad})


OPS = {"OPS": "1"}  # the operator's tool sets it: a tenant keeps it, with its value


@pytest.mark.parametrize(("env", "ok"), [
    ({"LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "Europe/Paris", "COLUMNS": "80"}, True),
    ({"LANG": "/srv/locale"}, False), ({"TZ": "../../etc/x"}, False), ({"TZ": ""}, False),
    ({"LC_ALL": "C", "TERM": "xterm"}, False), ({"TAR_OPTIONS": "-I sh"}, False),
    ({"HOME": "/tmp"}, False), ({"OPENSSL_CONF": "x"}, False), ({"PAGER": "cat"}, False),
    ({"OPS": "2"}, False), ({"FREE": "anything"}, True), ({"FIXED": "yes"}, True),
    ({"FIXED": "no"}, False),
])
def test_the_environment_is_an_allow_list(env: dict[str, str], ok: bool) -> None:
    bounds = TenantBounds(env={"FREE": None, "FIXED": "yes"})
    found = _pointers(ShellPolicy, {"env": {**OPS, **env}}, {"env": OPS}, bounds)
    assert (found == []) is ok, found


def test_a_tenant_keeps_the_operators_own_variables() -> None:
    assert _pointers(ShellPolicy, {"env": {"LANG": "C"}}, {"env": OPS}) == ["/env"]


def test_switches_turn_on_only_where_the_operator_or_the_ceiling_has_them_on() -> None:
    assert _pointers(FilesystemPolicy, {"allow_write": True}, {"allow_write": False}) == [
        "/allow_write"]
    assert _pointers(FilesystemPolicy, {"allow_write": True}, {"allow_write": True}) == []
    assert _pointers(FilesystemPolicy, {"allow_write": True, "allow_delete": True}, None,
                     TenantBounds(permissions=("allow_write",))) == ["/allow_delete"]
    assert _pointers(FilesystemPolicy, {"allow_write": "yes"}, None) == ["/allow_write"]
    assert _pointers(GitPolicy, {"managed_branch_prefix": "agent/me/"},
                     {"managed_branch_prefix": "agent/"}) == []
    assert _pointers(WebFetchPolicy, {"denied_hosts": ["a.com", "b.com"]},
                     {"denied_hosts": ["a.com"]}) == []
    assert _pointers(WebFetchPolicy, {"denied_hosts": ["b.com"]},
                     {"denied_hosts": ["a.com"]}) == ["/denied_hosts"]


def test_an_operator_tool_bounds_with_its_defaults_where_it_sets_nothing() -> None:
    tool = definition("filesystem", policy={"root": "/srv"})
    found = activation_excess({"allow_write": True, "max_read_bytes": 1_000_000}, tool,
                              FilesystemPolicy, TenantBounds())
    assert [e.pointer for e in found] == ["/policy/allow_write", "/policy/max_read_bytes"]
