"""The one rule for host-touching tenant values (``toolkeeper.bounds``): narrow within the
operator's ceiling, never widen; special ranges only when the operator lists them."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.bounds import (
    HostCommand,
    HostNetworks,
    HostPath,
    TenantBounds,
    excess,
    host_fields,
)
from toolkeeper.builtins.git import GitPolicy
from toolkeeper.builtins.http_request import HttpRequestPolicy
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
