"""Building gateways for tests: tools registered and published, one profile, two agents."""

from __future__ import annotations

from typing import Any

from toolkeeper import Activation, Agent, Autonomy, Gateway, Limits, Profile
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.store import Store


def build_gateway(url: str, *, tools: list[Any], autonomy: int = 2, scopes: tuple[str, ...] = (),
                  activations: tuple[Activation, ...] | None = None,
                  limits: Limits | None = None, **settings: Any) -> Gateway:
    """A gateway with ``tools`` registered and published, one profile ``p``, agent ``bot``."""
    gw = Gateway(Store.open(url), settings=Settings(**settings), factory=ProviderFactory())
    for t in tools:
        gw.registry.register(t, replace=True)  # set-up is declarative, like config
    acts = activations if activations is not None else tuple(
        Activation(tool=t.tool_name) for t in tools)
    gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(autonomy), scopes=scopes,
                                    activations=acts, limits=limits or Limits()),
                             replace=True)
    gw.registry.put_agent(Agent(name="bot", profile="p"), replace=True)
    gw.registry.put_agent(Agent(name="other-bot", profile="p"), replace=True)
    return gw


def update_profile(gw: Gateway, **changes: Any) -> None:
    """Replace fields of profile ``p`` (validated, as a config change would be)."""
    current = gw.catalog.profiles[("default", "p")].profile.model_dump()
    gw.registry.put_profile(Profile.model_validate({**current, **changes}), replace=True)
