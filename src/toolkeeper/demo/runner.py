"""The scripted agent of ``toolkeeper demo``: one pass through every gate of the pipeline.

It applies ``demo.yaml``, then drives real calls — allow, preview, confirm, approve, deny,
a scope and a policy denial, a deduplicated retry and a compensation — and checks each
outcome against what the spec promises. It doubles as a smoke test: :func:`run_demo`
returns ``False`` (and says what differed) the moment any outcome is not the expected one.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from toolkeeper.demo.tools import DemoWorld, natives
from toolkeeper.errors import OperationRefused
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import CallResult, Principal
from toolkeeper.model.enums import CallStatus, Gate, Role

DEMO_CONFIG = Path(__file__).with_name("demo.yaml")
BOT, JANITOR = "billing-bot", "janitor-bot"


@dataclass(slots=True, kw_only=True)
class Expect:
    """What one step must end with; ``None`` fields are not checked."""

    status: CallStatus
    reason: str | None = None
    gate: Gate | None = None
    deduped: bool | None = None


@dataclass(slots=True)
class DemoRun:
    """The demo's state: the gateway, the world the tools act on, the rows printed."""

    gw: Gateway
    world: DemoWorld
    console: Console
    rows: list[tuple[str, ...]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    gates_seen: set[str] = field(default_factory=set)
    memo: dict[str, Any] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    """Prefixes the turn groups, so a second demo on the same store starts fresh turns."""

    def turn(self, name: str) -> str:
        """This run's turn group ``name``."""
        return f"demo-{self.run_id}-{name}"

    def agent(self, name: str = BOT) -> Principal:
        """The in-process principal of agent ``name``."""
        principal = self.gw.principal(agent=name)
        assert principal is not None
        return principal

    def call(self, tool: str, arguments: dict[str, Any], *, agent: str = BOT,
             **fields: Any) -> CallResult:
        """One call through the whole pipeline as ``agent``."""
        return self.gw.call_sync(tool, None, arguments, agent=agent, **fields)

    def record(self, step: str, res: CallResult, want: Expect, note: str = "") -> CallResult:
        """Print one decision as a row and compare it with what was expected."""
        gate = res.gate.value if res.gate else "-"
        got = (res.status, None if res.reason is None else str(res.reason), res.gate,
               res.deduped)
        expected = (want.status, want.reason, want.gate, want.deduped)
        diffs = [f"{name}: expected {e}, got {g}" for name, e, g in
                 zip(("status", "reason", "gate", "deduped"), expected, got, strict=True)
                 if e is not None and e != g]
        if want.reason is None and res.reason is not None and want.status is res.status:
            diffs.append(f"reason: expected none, got {res.reason}")
        call = res.tool if res.action in (None, "run") else f"{res.tool}.{res.action}"
        status = res.status.value + (" (deduped: true)" if res.deduped else "")
        self._row(step, call, gate, status,
                  str(res.reason or "-"), note, diffs)
        if res.gate is not None and not diffs:
            self.gates_seen.add(res.gate.value)
        return res

    def check(self, step: str, what: str, ok: bool, note: str) -> None:
        """A check on the world (ledger, outbox, audit) rather than on a call result."""
        self._row(step, what, "-", "ok" if ok else "FAILED", "-", note,
                  [] if ok else [f"{what}: {note}"])

    def _row(self, step: str, call: str, gate: str, status: str, reason: str, note: str,
             diffs: list[str]) -> None:
        mark = "[green]✓[/]" if not diffs else "[red]✗[/]"
        outcome = status if reason in ("-", status) else f"{status} · {reason}"
        result = f"{escape(outcome)}\n[dim]{escape(note)}[/]" if note else escape(outcome)
        self.rows.append((mark, step, escape(call), gate, result))
        self.problems.extend(f"{step}: {d}" for d in diffs)


def step_allow(run: DemoRun) -> None:
    """Low risk at autonomy 1: the gate allows, the tool runs."""
    res = run.call("lookup_invoice", {"invoice_id": "INV-1001"})
    status = res.output.get("status") if isinstance(res.output, dict) else None
    run.record("allow", res, Expect(status=CallStatus.SUCCEEDED, gate=Gate.ALLOW),
               f"low risk at autonomy 1 runs at once (INV-1001 is {status})")


def step_preview(run: DemoRun) -> None:
    """Medium risk: a side-effect-free preview first, then the call with its token."""
    args = {"to": "ap@acme.example", "subject": "Invoice INV-1001 is due",
            "body": "Hello Acme, invoice INV-1001 (250.00) is due on Friday."}
    first = run.call("send_email", args)
    summary = first.preview.get("summary") if isinstance(first.preview, dict) else None
    run.record("preview", first, Expect(status=CallStatus.PREVIEW_REQUIRED,
                                        reason="preview_required", gate=Gate.PREVIEW),
               f"nothing sent; preview: {summary}")
    run.check("preview", "outbox", not run.world.outbox, "still empty after the preview")
    res = run.call("send_email", args, preview_token=first.preview_token)
    run.record("preview", res, Expect(status=CallStatus.SUCCEEDED, gate=Gate.PREVIEW),
               "re-submitted with the preview token: sent")
    run.check("preview", "outbox", len(run.world.outbox) == 1,
              f"{len(run.world.outbox)} email in the outbox")


def step_confirm(run: DemoRun) -> None:
    """High risk: the agent's own user confirms, the call is re-submitted with the id."""
    args = {"invoice_id": "INV-1001", "amount": 250.0}
    first = run.call("pay_invoice", args, turn_group_id=run.turn("1"))
    run.record("confirm", first, Expect(status=CallStatus.CONFIRMATION_REQUIRED,
                                        reason="confirmation_required", gate=Gate.CONFIRM),
               "high risk at autonomy 1: the agent's user must confirm")
    if first.approval_id is None:
        return
    run.gw.approvals.confirm(first.approval_id, run.agent())
    res = run.call("pay_invoice", args, turn_group_id=run.turn("1"), approval_id=first.approval_id)
    run.record("confirm", res, Expect(status=CallStatus.SUCCEEDED, gate=Gate.CONFIRM),
               "confirmed by the user, re-submitted with the approval id: paid")
    run.memo["payment"] = res
    run.memo["confirm_approval"] = first.approval_id


def step_dedupe(run: DemoRun) -> None:
    """The same call in the same turn group again: the recorded outcome, no second run."""
    args = {"invoice_id": "INV-1001", "amount": 250.0}
    res = run.call("pay_invoice", args, turn_group_id=run.turn("1"),
                   approval_id=run.memo.get("confirm_approval"))
    run.record("dedupe", res, Expect(status=CallStatus.SUCCEEDED, deduped=True),
               "same turn group, same arguments: the recorded outcome is returned")
    payments = len(run.world.payments)
    run.check("dedupe", "payment ledger", payments == 1,
              f"{payments} payment in the ledger: the tool ran once")


def step_approve(run: DemoRun, approver: Principal) -> None:
    """Critical (raised by an adjuster): only an approver other than the agent decides."""
    args = {"invoice_id": "INV-1003", "amount": 4200.0}
    first = run.call("pay_invoice", args, turn_group_id=run.turn("2"))
    run.record("approve", first, Expect(status=CallStatus.APPROVAL_REQUIRED,
                                        reason="approval_required", gate=Gate.APPROVE),
               "amount > 1000 raises the risk to critical: an approver must decide")
    if first.approval_id is None:
        return
    try:
        run.gw.approvals.approve(first.approval_id, run.agent())
        refused = ""
    except OperationRefused as exc:
        refused = str(exc.reason)
    run.check("approve", "self-approval", refused == "approver_not_allowed",
              f"the agent cannot approve its own call ({refused or 'it could!'})")
    run.gw.approvals.approve(first.approval_id, approver, note="checked against the PO")
    res = run.call("pay_invoice", args, turn_group_id=run.turn("2"), approval_id=first.approval_id)
    run.record("approve", res, Expect(status=CallStatus.SUCCEEDED, gate=Gate.APPROVE),
               f"approved by {approver.name}, re-submitted: paid")


def step_denials(run: DemoRun) -> None:
    """Gate deny, a missing scope and a tool the profile does not activate."""
    res = run.call("delete_repository", {"name": "legacy-reports"}, agent=JANITOR)
    run.record("deny", res, Expect(status=CallStatus.DENIED, reason="gate_denied",
                                   gate=Gate.DENY),
               "critical at autonomy 0 (manual) is never run")
    run.check("deny", "repositories", "legacy-reports" in run.world.repositories,
              "legacy-reports still exists")
    mail = {"to": "billing@globex.example", "subject": "Hi", "body": "Hello"}
    res = run.call("send_email", mail, scopes=["invoices:read"])
    run.record("scope", res, Expect(status=CallStatus.DENIED, reason="scope_missing"),
               "the request narrowed its scopes to invoices:read; email:send is missing")
    res = run.call("delete_repository", {"name": "billing-service"})
    run.record("policy", res, Expect(status=CallStatus.DENIED, reason="tool_not_enabled"),
               "delete_repository is not activated for billing-assistant")


def step_compensate(run: DemoRun, approver: Principal) -> None:
    """Undo the first payment through its named compensation (a refund)."""
    payment = run.memo.get("payment")
    effect = payment.side_effect_id if isinstance(payment, CallResult) else None
    if effect is None:
        run.check("compensate", "side effect", False, "the payment recorded no side effect")
        return
    res = run.gw.run_sync(run.gw.calls.compensate(effect, approver))
    run.record("compensate", res, Expect(status=CallStatus.SUCCEEDED, gate=Gate.ALLOW),
               "the payment's compensation ran through the pipeline")
    inv = run.world.invoices["INV-1001"]
    refunded = sum(1 for p in run.world.payments.values() if p["refunded"])
    run.check("compensate", "payment ledger", refunded == 1 and inv.paid == 0.0,
              f"{refunded} payment refunded; INV-1001 is {inv.status} again")


def _chains(gw: Gateway) -> list[str | None]:
    # Checked alone, this package sees AuditRepo.tenants() as "list?" (its class body
    # shadows the builtin ``list``); typed here so both mypy runs agree.
    tenants: Any = gw.store.audit.tenants()
    return [t if t is None else str(t) for t in tenants]


def step_audit(run: DemoRun) -> None:
    """Every audit chain recomputes intact."""
    run.gw.flush()
    reports = [run.gw.store.audit.verify(t) for t in _chains(run.gw)]
    events = sum(r.events for r in reports)
    ok = bool(reports) and all(r.ok for r in reports)
    problems = [p for r in reports for p in r.problems]
    run.check("audit", "audit verify", ok,
              f"{events} events in {len(reports)} hash chain(s): "
              + ("intact" if ok else "; ".join(problems)))


def apply_demo(gw: Gateway, world: DemoWorld) -> None:
    """Apply demo.yaml with every demo tool acting on ``world``: one ledger, so a payment
    shows in the next look-up and can be refunded (``toolkeeper demo`` and ``serve
    --demo`` alike)."""
    from toolkeeper.config import apply_file

    apply_file(gw, str(DEMO_CONFIG))
    # config loading registers the classes; the demo runs instances sharing one world
    gw.factory.natives.update(natives(world))
    gw.reload()


def _setup(gw: Gateway, world: DemoWorld) -> Principal:
    """Apply demo.yaml, run the tools on ``world``, create the approver."""
    apply_demo(gw, world)
    _rec, token = gw.store.tokens.create(tenant_id="default", role=Role.APPROVER.value,
                                         label="alice (approver)")
    approver = gw.authenticate(token)
    assert approver is not None
    return approver


def run_demo(url: str, console: Console, world: DemoWorld | None = None) -> bool:
    """Run every step on the store at ``url``; ``True`` when every outcome was expected.

    ``world`` is the state the tools act on (default: :meth:`DemoWorld.sample`).
    """
    world = world if world is not None else DemoWorld.sample()
    with Gateway.open(url) as gw:
        run = DemoRun(gw=gw, world=world, console=console)
        approver = _setup(gw, world)
        console.print(Panel.fit(
            "billing-bot (autonomy 1) and janitor-bot (autonomy 0) call five tools;\n"
            f"approver: {approver.name}. Each row is one decision of the pipeline.",
            title="toolkeeper demo"))
        steps: list[tuple[str, Callable[[], None]]] = [
            ("allow", lambda: step_allow(run)), ("preview", lambda: step_preview(run)),
            ("confirm", lambda: step_confirm(run)), ("dedupe", lambda: step_dedupe(run)),
            ("approve", lambda: step_approve(run, approver)),
            ("deny", lambda: step_denials(run)),
            ("compensate", lambda: step_compensate(run, approver)),
            ("audit", lambda: step_audit(run))]
        for name, step in steps:
            try:
                step()
            except Exception as exc:  # a smoke test reports, it does not crash
                run.problems.append(f"{name}: raised {type(exc).__name__}: {exc}")
    _report(run)
    return not run.problems


def _report(run: DemoRun) -> None:
    t = Table(title="decisions", show_lines=True)
    for name in ("", "step", "call", "gate"):
        t.add_column(name, no_wrap=True)
    t.add_column("status · reason / note", overflow="fold")
    for row in run.rows:
        t.add_row(*row)
    run.console.print(t)
    missing = [g.value for g in Gate if g.value not in run.gates_seen]
    if missing:
        run.problems.append(f"gates never exercised: {', '.join(missing)}")
    if run.problems:
        run.console.print("[bold red]demo FAILED[/]: outcomes differed from the spec:")
        for problem in run.problems:
            run.console.print(f"  - {problem}", markup=False, highlight=False)
        return
    run.console.print(f"[bold green]demo ok[/]: gates exercised: "
                      f"{', '.join(g.value for g in Gate)}; ledger "
                      f"{len(run.world.payments)} payments, outbox {len(run.world.outbox)} "
                      "email; audit chain intact.", highlight=False)
