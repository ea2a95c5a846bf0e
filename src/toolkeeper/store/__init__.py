"""The store: one schema on SQLite (default) or PostgreSQL, managed by Alembic."""

from __future__ import annotations

from toolkeeper.store.agent_calls import AgentCallRepo
from toolkeeper.store.approvals import ApprovalRepo
from toolkeeper.store.audit import AuditRepo
from toolkeeper.store.audit_checkpoints import Checkpoints
from toolkeeper.store.audit_export import ExportCursors
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.blobs import BlobRepo
from toolkeeper.store.budgets import BudgetRepo
from toolkeeper.store.caps import CapRepo
from toolkeeper.store.credentials import CredentialRepo
from toolkeeper.store.db import DEFAULT_URL, Database
from toolkeeper.store.mcp_tasks import McpTaskRepo
from toolkeeper.store.outcomes import OutcomeRepo
from toolkeeper.store.overview import OverviewRepo
from toolkeeper.store.rates import RateRepo
from toolkeeper.store.recent_calls import RecentCallRepo
from toolkeeper.store.registry import RegistryRepo
from toolkeeper.store.request_states import RequestStateRepo
from toolkeeper.store.retrieval import RetrievalRepo
from toolkeeper.store.sessions import SessionRepo
from toolkeeper.store.stats import CallStatsRepo
from toolkeeper.store.tokens import TokenRepo
from toolkeeper.store.turns import TurnRepo


class Store:
    """Every repository over one database. Construct with :meth:`open`."""

    def __init__(self, db: Database, *, audit_key: AuditKey | None = None,
                 checkpoints: Checkpoints | None = None) -> None:
        self.db = db
        self.audit = AuditRepo(db, audit_key, checkpoints)
        self.outcomes = OutcomeRepo(db, self.audit)
        self.approvals = ApprovalRepo(db, self.audit)
        self.registry = RegistryRepo(db)
        self.tokens = TokenRepo(db)
        self.turns = TurnRepo(db)
        self.blobs = BlobRepo(db)
        self.credentials = CredentialRepo(db)
        self.rates = RateRepo(db)
        self.budgets = BudgetRepo(db)
        self.caps = CapRepo(db)
        self.retrieval = RetrievalRepo(db)
        self.recent_calls = RecentCallRepo(db)
        self.call_stats = CallStatsRepo(db)
        self.overview = OverviewRepo(db)
        self.agent_calls = AgentCallRepo(db)
        self.sessions = SessionRepo(db)
        self.request_states = RequestStateRepo(db)
        self.mcp_tasks = McpTaskRepo(db)
        self.audit_export = ExportCursors(db)

    @classmethod
    def open(cls, url: str = DEFAULT_URL, *, migrate: bool = True,
             audit_key: AuditKey | None = None, checkpoints: Checkpoints | None = None) -> Store:
        """Open (and by default migrate to the latest schema) the database at ``url``;
        the audit chain is keyed with ``audit_key`` and checkpointed to ``checkpoints``."""
        if migrate:
            from toolkeeper.store.migrate import ensure_head

            ensure_head(url)
        return cls(Database(url), audit_key=audit_key, checkpoints=checkpoints)

    @property
    def is_local(self) -> bool:
        """SQLite calls are short and local: the pipeline runs them on the event loop."""
        return self.db.is_sqlite

    def close(self) -> None:
        self.outcomes.group.close()
        self.db.dispose()


__all__ = ["DEFAULT_URL", "Database", "Store"]
