"""A gateway with the ``retrieval`` built-in, a ``rag_retrieval`` tool and two tenants, each
with an agent allowed to query and a small knowledge base."""

from __future__ import annotations

from typing import Any

from toolkeeper import Activation, Agent, Gateway, Profile
from toolkeeper.builtins import definition
from toolkeeper.model.tool import ToolDefinition

DOCS: list[dict[str, Any]] = [
    {"text": "To reset your password open Settings, choose Security and click Reset "
             "password. A reset link is mailed to you.",
     "source": "help/password.md", "metadata": {"lang": "en", "section": "account"}},
    {"text": "Invoices are sent on the first day of each month. Payment is due within "
             "thirty days; a password is never needed to pay.",
     "source": "help/billing.md", "metadata": {"lang": "en", "section": "billing"}},
    {"text": "Pour réinitialiser votre mot de passe, ouvrez les paramètres.",
     "source": "help/fr/password.md", "metadata": {"lang": "fr", "section": "account"}},
]
OTHER_DOCS: list[dict[str, Any]] = [
    {"text": "Secret roadmap of the other tenant: password vault rewrite.",
     "source": "other/roadmap.md", "metadata": {"lang": "en"}},
]


def rag_tool(tenant: str, pipeline: str, **implementation: Any) -> ToolDefinition:
    return ToolDefinition(name="kb_search", tenant_id=tenant, implementation_type="rag_retrieval",
                          implementation={"pipeline_id": pipeline, **implementation},
                          description="Search the help centre.")


def seed(gw: Gateway, *, policy: dict[str, Any] | None = None) -> dict[str, str]:
    """Both tenants' pipelines (named ``kb``), documents, the tools and agents ``bot``
    (tenant ``default``) and ``other-bot`` (tenant ``other``). Returns pipeline ids."""
    gw.registry.register(definition("retrieval"))
    ids = {}
    for tenant, docs, agent in (("default", DOCS, "bot"), ("other", OTHER_DOCS, "other-bot")):
        ids[tenant] = gw.retrieval.create(tenant, "kb", chunk_chars=200, chunk_overlap=20).id
        gw.retrieval.ingest(tenant, "kb", docs)
        gw.registry.save(rag_tool(tenant, "kb"))
        gw.registry.publish("kb_search", tenant)
        acts = (Activation(tool="retrieval", policy=policy or {}),
                Activation(tool="kb_search"))
        gw.registry.put_profile(Profile(name="reader", tenant_id=tenant, autonomy=2,
                                        activations=acts))
        gw.registry.put_agent(Agent(name=agent, profile="reader", tenant_id=tenant))
    return ids
