"""Who may act, and as what (SPEC §7, §8): tenants, agents, profiles, activations, tokens and
credentials, and the ownership rules every face shares (REST, CLI, config).

Every record belongs to one tenant; an operation names the tenant it acts in and the
principal acting (``by``), and another tenant's record is ``not_found`` (never hinted at).
Admins of the tenant write; operators and approvers read agents, profiles and activations;
an agent reads only its own agent and profile. Refusals are
:class:`~toolkeeper.errors.OperationRefused` with a stable reason; REST maps them to HTTP
statuses, the CLI to exit codes. Revoking a revoked token is a no-op (idempotent), so a
retried revoke never fails. Deleting an agent revokes its tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from toolkeeper.bounds import Excess, TenantBounds, activation_excess, refuse
from toolkeeper.builtins.agent_call import endpoint_excess, refuse_endpoint
from toolkeeper.errors import OperationRefused, ToolDenied
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.profile import Activation, Agent, AgentEndpoint, Profile
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.netguard import NetGuard
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.secrets.credentials import TenantCredentials
from toolkeeper.store.records import TokenRecord
from toolkeeper.store.registry import RegistryRepo
from toolkeeper.store.tokens import TokenRepo

_READERS = (Role.OPERATOR, Role.APPROVER)


def not_found(what: str, name: str) -> OperationRefused:
    """The refusal for a record missing from (or not visible to) the tenant."""
    return OperationRefused(Reason.NOT_FOUND, f"no {what} {name!r} in this tenant")


def invalid(message: str, pointer: str) -> OperationRefused:
    """An ``invalid_arguments`` refusal pointing at one field."""
    return OperationRefused(Reason.INVALID_ARGUMENTS, message,
                            errors=[{"pointer": pointer, "message": message}])


def refuse_inward_url(url: str, networks: tuple[str, ...], pointer: str = "/url") -> None:
    """Refuse, when it is written, a URL the SSRF guard refuses without resolving anything
    (``NetGuard.check_url``: every ``inet_aton`` spelling of an address, IPv6 literals,
    ``localhost`` names) unless ``networks`` admit it: the admin is told now, not a log
    line at call time. Names are resolved and checked on every call (and by REST when set)."""
    try:
        NetGuard(allowed_networks=networks).check_url(url)
    except ToolDenied as exc:
        message = f"{url[:200]!r} is not allowed: {exc}"
        raise OperationRefused(exc.reason, message,
                               errors=[{"pointer": pointer, "message": message}]) from None


def require(by: Principal, tenant_id: str, *roles: Role) -> None:
    """``forbidden`` unless ``by`` acts in ``tenant_id`` with one of ``roles`` (admin has
    them all)."""
    if by.tenant_id != tenant_id:
        raise OperationRefused(Reason.FORBIDDEN, f"a principal of tenant {by.tenant_id!r} "
                               f"cannot act in tenant {tenant_id!r}")
    if not by.has_role(*roles):
        raise OperationRefused(Reason.FORBIDDEN,
                               f"this needs the role {', '.join(r.value for r in roles)}")


class IdentityService:
    """The one home of the identity rules; faces only translate refusals."""

    def __init__(self, *, registry: RegistryRepo, tokens: TokenRepo,
                 credentials: TenantCredentials | None, catalog: Callable[[], Catalog],
                 put_profile: Callable[[Profile], None], put_agent: Callable[[Agent], None],
                 definitions_changed: Callable[[], None], secrets_changed: Callable[[], None],
                 policy_model: Callable[[ToolDefinition], type[BaseModel]],
                 bounds: TenantBounds) -> None:
        self._registry, self._tokens, self._credentials = registry, tokens, credentials
        self._catalog = catalog
        self._put_profile, self._put_agent = put_profile, put_agent
        self._changed, self._secrets_changed = definitions_changed, secrets_changed
        self._policy_model, self._bounds = policy_model, bounds

    # -- tokens -------------------------------------------------------------------------

    def issue_token(self, tenant_id: str, role: Role, *, agent: str | None = None,
                    label: str = "") -> tuple[TokenRecord, str]:
        """A new token of ``tenant_id`` (trusted: no principal); the plaintext is returned
        once and never stored."""
        if (role is Role.AGENT) != (agent is not None):
            raise invalid("'agent' is required for role agent, and only for it", "/agent")
        if agent is not None and (tenant_id, agent) not in self._catalog().agents:
            raise invalid(f"no agent {agent!r} in this tenant", "/agent")
        return self._tokens.create(tenant_id=tenant_id, role=role.value, agent=agent,
                                   label=label)

    def create_token(self, by: Principal, tenant_id: str, role: Role, *,
                     agent: str | None = None, label: str = "") -> tuple[TokenRecord, str]:
        """:meth:`issue_token` for an admin of the tenant."""
        require(by, tenant_id, Role.ADMIN)
        return self.issue_token(tenant_id, role, agent=agent, label=label)

    def list_tokens(self, by: Principal, tenant_id: str) -> list[TokenRecord]:
        """The tenant's tokens (records only: plaintexts are never stored)."""
        require(by, tenant_id, Role.ADMIN)
        return self.tokens(tenant_id)

    def tokens(self, tenant_id: str) -> list[TokenRecord]:
        """Trusted :meth:`list_tokens` (a holder of the database, e.g. the CLI)."""
        return self._tokens.list(tenant_id)

    def revoke_token(self, by: Principal, tenant_id: str, token_id: str) -> TokenRecord:
        """Revoke a token of the tenant; a revoked one stays revoked (idempotent: the
        outcome a retry wants). Another tenant's token is ``not_found``."""
        require(by, tenant_id, Role.ADMIN)
        rec = self._tokens.get(token_id)
        if rec is None or rec.tenant_id != tenant_id:
            raise not_found("token", token_id)
        if rec.revoked_at is None:
            self._tokens.revoke(token_id)
            rec = self._tokens.get(token_id) or rec
        return rec

    # -- agents -------------------------------------------------------------------------

    def agents(self, tenant_id: str) -> list[Agent]:
        return sorted((a for a in self._registry.agents() if a.tenant_id == tenant_id),
                      key=lambda a: a.name)

    def list_agents(self, by: Principal, tenant_id: str) -> list[Agent]:
        require(by, tenant_id, *_READERS)
        return self.agents(tenant_id)

    def get_agent(self, by: Principal, tenant_id: str, name: str) -> Agent:
        """One agent, for people of the tenant or that agent itself."""
        require(by, tenant_id, *_READERS, Role.AGENT)
        if not by.has_role(*_READERS) and by.agent != name:
            raise not_found("agent", name)
        for a in self.agents(tenant_id):
            if a.name == name:
                return a
        raise not_found("agent", name)

    def create_agent(self, by: Principal, agent: Agent) -> Agent:
        require(by, agent.tenant_id, Role.ADMIN)
        if any(a.name == agent.name for a in self.agents(agent.tenant_id)):
            raise OperationRefused(Reason.CONFLICT, f"agent {agent.name!r} exists already")
        return self._save_agent(agent)

    def update_agent(self, by: Principal, agent: Agent) -> Agent:
        """Rebind an existing agent to a profile (and description); its endpoint stays."""
        require(by, agent.tenant_id, Role.ADMIN)
        current = self.get_agent(by, agent.tenant_id, agent.name)
        return self._save_agent(agent.model_copy(update={"endpoint": current.endpoint}))

    def set_endpoint(self, by: Principal, tenant_id: str, name: str,
                     endpoint: AgentEndpoint | None) -> Agent:
        """Register (replace) or remove (``None``) the agent's ``agent_call`` endpoint. A
        tenant's networks stay within the operator's ceiling (``policy_exceeds_bounds``)."""
        current, endpoint = self.vet_endpoint(by, tenant_id, name, endpoint)
        saved = current.model_copy(update={"endpoint": endpoint})
        self._put_agent(saved)
        return saved

    def vet_endpoint(self, by: Principal, tenant_id: str, name: str,
                     endpoint: AgentEndpoint | None) -> tuple[Agent, AgentEndpoint | None]:
        """``set_endpoint``'s checks without the write: the agent, and the endpoint as it
        would be stored (``origin`` ``api``); raises as ``set_endpoint`` would."""
        require(by, tenant_id, Role.ADMIN)
        current = self.get_agent(by, tenant_id, name)
        if endpoint is not None:
            endpoint = endpoint.model_copy(update={"origin": "api"})
            refuse(endpoint_excess(endpoint, self._bounds, at=""), f"agent {name!r} endpoint")
            refuse_endpoint(endpoint)
            refuse_inward_url(endpoint.url, endpoint.allowed_networks)
        return current, endpoint

    def _save_agent(self, agent: Agent) -> Agent:
        if self._profile(agent.tenant_id, agent.profile) is None:
            raise invalid(f"no profile {agent.profile!r} in this tenant", "/profile")
        self._put_agent(agent)
        return agent

    def delete_agent(self, by: Principal, tenant_id: str, name: str) -> list[str]:
        """Delete an agent and revoke its tokens; the ids revoked."""
        require(by, tenant_id, Role.ADMIN)
        revoked = self.drop_agent(tenant_id, name)
        if revoked is None:
            raise not_found("agent", name)
        return revoked

    def drop_agent(self, tenant_id: str, name: str) -> list[str] | None:
        """Trusted delete (config prune, :meth:`delete_agent`): the agent goes and so do
        its live tokens. ``None`` if there was no such agent."""
        if not self._registry.delete_named("agents", tenant_id, name):
            return None
        revoked = [rec.id for rec in self._tokens.list(tenant_id)
                   if rec.agent == name and rec.revoked_at is None]
        for token_id in revoked:
            self._tokens.revoke(token_id)
        self._changed()
        return revoked

    # -- profiles and activations --------------------------------------------------------

    def _profile(self, tenant_id: str, name: str) -> Profile | None:
        for p in self._registry.profiles():
            if p.tenant_id == tenant_id and p.name == name:
                return p
        return None

    def list_profiles(self, by: Principal, tenant_id: str) -> list[Profile]:
        require(by, tenant_id, *_READERS)
        return sorted((p for p in self._registry.profiles() if p.tenant_id == tenant_id),
                      key=lambda p: p.name)

    def get_profile(self, by: Principal, tenant_id: str, name: str) -> Profile:
        """One profile, for people of the tenant or an agent bound to it."""
        require(by, tenant_id, *_READERS, Role.AGENT)
        if not by.has_role(*_READERS):
            own = self._catalog().agents.get((tenant_id, by.agent or ""))
            if own is None or own.profile != name:
                raise not_found("profile", name)
        found = self._profile(tenant_id, name)
        if found is None:
            raise not_found("profile", name)
        return found

    def create_profile(self, by: Principal, profile: Profile) -> Profile:
        require(by, profile.tenant_id, Role.ADMIN)
        if self._profile(profile.tenant_id, profile.name) is not None:
            raise OperationRefused(Reason.CONFLICT, f"profile {profile.name!r} exists already")
        return self._save_profile(profile)

    def replace_profile(self, by: Principal, profile: Profile) -> Profile:
        require(by, profile.tenant_id, Role.ADMIN)
        if self._profile(profile.tenant_id, profile.name) is None:
            raise not_found("profile", profile.name)
        return self._save_profile(profile)

    def delete_profile(self, by: Principal, tenant_id: str, name: str) -> None:
        """Delete a profile no agent uses (``conflict`` naming the agents otherwise)."""
        require(by, tenant_id, Role.ADMIN)
        users = [a.name for a in self.agents(tenant_id) if a.profile == name]
        if users:
            raise OperationRefused(Reason.CONFLICT, f"profile {name!r} is used by agents",
                                   agents=users)
        if not self._registry.delete_named("profiles", tenant_id, name):
            raise not_found("profile", name)
        self._changed()

    def list_activations(self, by: Principal, tenant_id: str, profile: str) -> list[Activation]:
        return list(self.get_profile(by, tenant_id, profile).activations)

    def put_activation(self, by: Principal, tenant_id: str, profile: str,
                       act: Activation) -> Activation:
        """Enable one tool for a profile (replacing that tool's activation)."""
        require(by, tenant_id, Role.ADMIN)
        current = self._profile(tenant_id, profile)
        if current is None:
            raise not_found("profile", profile)
        refuse(self._beyond_bounds(tenant_id, act, "/policy"), f"activation {act.tool!r}")
        others = tuple(a for a in current.activations if a.tool != act.tool)
        self._save_profile(current.model_copy(update={"activations": (*others, act)}))
        return act

    def delete_activation(self, by: Principal, tenant_id: str, profile: str,
                          tool: str) -> None:
        require(by, tenant_id, Role.ADMIN)
        current = self._profile(tenant_id, profile)
        if current is None or current.activation(tool) is None:
            raise not_found("activation", f"{profile}/{tool}")
        kept = tuple(a for a in current.activations if a.tool != tool)
        self._put_profile(current.model_copy(update={"activations": kept}))

    def _save_profile(self, profile: Profile) -> Profile:
        """Store a profile a tenant wrote (origin ``api``) after checking it."""
        self._check_activations(profile)
        refuse([e for i, act in enumerate(profile.activations)
                for e in self._beyond_bounds(profile.tenant_id, act,
                                             f"/activations/{i}/policy")],
               f"profile {profile.name!r}")
        saved = profile.model_copy(update={"origin": "api"})
        self._put_profile(saved)
        return saved

    def _check_activations(self, profile: Profile) -> None:
        """Every activation names a tool visible to the tenant, and actions it has."""
        errors: list[dict[str, str]] = []
        catalog = self._catalog()
        for i, act in enumerate(profile.activations):
            rec = catalog.record(profile.tenant_id, act.tool)
            if rec is None:
                errors.append({"pointer": f"/activations/{i}/tool",
                               "message": f"no tool {act.tool!r} visible to this tenant"})
                continue
            unknown = sorted(set(act.actions or ()) - set(rec[1].actions))
            if unknown:
                errors.append({"pointer": f"/activations/{i}/actions",
                               "message": f"{act.tool} has no action {', '.join(unknown)}"})
        if errors:
            raise OperationRefused(Reason.INVALID_ARGUMENTS, "the profile is invalid",
                                   errors=errors)

    def _beyond_bounds(self, tenant_id: str, act: Activation, at: str) -> list[Excess]:
        """The activation's host-touching values beyond the operator's ceiling."""
        rec = self._catalog().record(tenant_id, act.tool)
        if rec is None:
            return []
        return activation_excess(act.policy, rec[1], self._policy_model(rec[1]), self._bounds,
                                 at=at)

    # -- credentials --------------------------------------------------------------------

    def _sealed(self) -> TenantCredentials:
        if self._credentials is None:
            raise OperationRefused(
                Reason.CONFLICT, "credentials are managed here only with the embedded "
                "secrets backend (config 'secrets: {backend: embedded}' and "
                "TOOLKEEPER_SECRETS_KEY or a key file)")
        return self._credentials

    def put_credential(self, by: Principal, tenant_id: str, connector: str, key: str,
                       value: str) -> None:
        """Store (or replace) a credential of the tenant; it never comes back out."""
        require(by, tenant_id, Role.ADMIN)
        self._sealed().put(tenant_id, connector, key, value)
        self._secrets_changed()

    def list_credentials(self, by: Principal, tenant_id: str) -> list[tuple[str, str]]:
        """The tenant's credential names (a key with '/', the webhook's HMAC secret, is
        managed by its own setting, not here)."""
        require(by, tenant_id, Role.ADMIN)
        return [(c, k) for c, k in self._sealed().names(tenant_id) if "/" not in k]

    def delete_credential(self, by: Principal, tenant_id: str, connector: str,
                          key: str) -> None:
        require(by, tenant_id, Role.ADMIN)
        if not self._sealed().delete(tenant_id, connector, key):
            raise not_found("credential", f"{connector}/{key}")
        self._secrets_changed()

    # -- tenants ------------------------------------------------------------------------

    def tenants(self) -> list[tuple[str, str]]:
        """Every tenant as ``(id, name)``."""
        return self._registry.tenant_names()

    def create_tenant(self, tenant_id: str, name: str | None = None) -> tuple[TokenRecord, str]:
        """A new tenant and its first admin token (trusted: the face checks that the caller
        manages tenants). ``conflict`` if it exists."""
        if tenant_id in self._registry.tenants():
            raise OperationRefused(Reason.CONFLICT, f"tenant {tenant_id!r} exists already")
        self._registry.ensure_tenant(tenant_id, name)
        return self._tokens.create(tenant_id=tenant_id, role=Role.ADMIN.value,
                                   label=f"{tenant_id} admin")


__all__ = ["IdentityService", "invalid", "not_found", "require"]
