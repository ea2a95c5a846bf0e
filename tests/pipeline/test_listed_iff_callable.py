"""SPEC §2: what an agent can see and what it can call are decided by the same policy.

Over random worlds (:mod:`tests.pipeline.listed_world`), a tool action is listed for the
agent iff a call to it is not refused for a reason the listing reflects (resolve: tenant,
lifecycle, activation, action allow-lists; scope; health, a half-open breaker included;
the gate at the action's own risk raised by the argument-free adjusters). Checked through
the library, REST (``GET /discovery/agents/{agent}/enabled``, ``POST /tools/execute``) and
MCP (``tools/list``, ``tools/call`` on ``/mcp``), each face's listing against its own call
answers. Each run prints its outcome distribution and fails unless every refusal class is
reached in at least 5 % of its calls (``SHARE``), so the generators cannot drift back to
worlds where every call stops at resolve. The worlds are stratified: each has one tool built
for each outcome class (:data:`listed_world.FOCUS`) beside random ones, so the shares hold
by construction. ``test_listed_iff_callable_mutants`` shows the
checker catching deliberately broken rules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.identity.provider import provider
from tests.pipeline.listed_world import (
    PROFILE_ONLY,
    REQUIRED,
    SCOPES,
    WORLDS,
    LibraryFace,
    McpFace,
    Mint,
    RestFace,
    describe,
    run_property,
    shares,
)
from toolkeeper import Gateway, Mode
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.config.identity import IdentityConfig

pytestmark = pytest.mark.property
SHARE = 0.05
"""The least share of a run's calls each class in ``REQUIRED`` must reach."""


def open_gateway(tmp: Path, mode: Mode = Mode.PRODUCTION) -> Gateway:
    return Gateway.open(f"sqlite:///{tmp / 'listed.db'}", mode=mode)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    gateway = open_gateway(tmp_path_factory.mktemp("listed"))
    yield gateway
    gateway.close()


@pytest.fixture(scope="module")
def mint(gw: Gateway) -> Iterator[Mint]:
    """Real OAuth access tokens for the worlds that draw token scopes: JWTs signed by a
    loopback issuer the gateway is configured to trust (identity scopes ``s1``… map to the
    toolkeeper scopes of the same name; tenant from the token, agent from ``client_id``)."""
    with provider() as issuer:
        kid = issuer.new_key()
        gw.identity_config = IdentityConfig.model_validate({
            "resource": "https://tk.example", "issuers": [{
                "issuer": issuer.url, "claims": {
                    "tenant_claim": "tk_tenant", "agent_claim": "client_id",
                    "scopes": {s: [s] for s in (*SCOPES, PROFILE_ONLY)}}}]})
        gw._bearers = None

        def signed(tenant: str, agent: str, scopes: frozenset[str]) -> str:
            return issuer.sign(kid, tk_tenant=tenant, client_id=agent,
                               scope=" ".join(sorted(scopes)))
        yield signed


@pytest.fixture(scope="module")
def client(gw: Gateway) -> Iterator[Any]:
    with TestClient(create_app(gw, ApiSettings())) as c:
        yield c


def assert_reached(tally: Counter[str], face: str, *, share: float = SHARE) -> None:
    print(f"\n{face}: {sum(tally.values())} calls: {describe(tally)}")
    got = shares(tally)
    short = {k: round(got.get(k, 0.0), 3) for k in REQUIRED if got.get(k, 0.0) < share}
    assert not short, f"{face}: classes under {share:.0%} of calls: {short}"
    assert tally["half_open_admitted"] > 0, "no call reached a half-open breaker"


def test_the_library_lists_exactly_what_it_lets_the_agent_call(gw: Gateway) -> None:
    """Also the control of ``test_listed_iff_callable_mutants`` (the same worlds)."""
    assert_reached(run_property(gw, LibraryFace(), examples=WORLDS), "library")


def test_the_library_with_oauth_scoped_principals(gw: Gateway) -> None:
    """Worlds that draw token scopes call as a principal with those scopes (the library
    needs no token: the minted one is unused)."""
    assert_reached(run_property(gw, LibraryFace(), examples=WORLDS,
                                mint=lambda tenant, agent, scopes: ""), "library (oauth)")


def test_in_debug_mode_too(tmp_path: Path) -> None:
    """Drafts run in debug mode: the listing follows."""
    gateway = open_gateway(tmp_path, Mode.DEBUG)
    try:
        tally = run_property(gateway, LibraryFace(), examples=6)
    finally:
        gateway.close()
    print(f"\nlibrary (debug): {describe(tally)}")


def test_rest_lists_exactly_what_it_lets_the_agent_call(client: Any, gw: Gateway,
                                                        mint: Mint) -> None:
    """With ``tk_…`` tokens and OAuth access tokens whose scopes narrow the profile's."""
    assert_reached(run_property(gw, RestFace(client), examples=8, mint=mint), "rest")


def test_mcp_lists_exactly_what_it_lets_the_agent_call(client: Any, gw: Gateway,
                                                       mint: Mint) -> None:
    """As REST; a call the token lacks scope for is the 403 step-up challenge."""
    assert_reached(run_property(gw, McpFace(client), examples=8, mint=mint), "mcp")
