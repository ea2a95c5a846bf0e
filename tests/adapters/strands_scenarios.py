"""The Strands adapter's scenarios, run under ``.venv-strands/bin/python`` (strands-agents
requires mcp<2.2, so it cannot be imported in the project venv) by
``tests/adapters/test_strands.py``, which asserts on what this prints and on the executions
counted on the tool side (``$TOOLKEEPER_TEST_LEDGER``).

    python tests/adapters/strands_scenarios.py remote URL TOKENS_JSON
    python tests/adapters/strands_scenarios.py inprocess DATABASE_URL TOKENS_JSON CONFIG

Each scenario drives a real Strands ``Agent`` with a scripted model (a ``Model`` subclass
that calls tools on its first turn and then repeats what each returned) over the tools of
``tests.adapters.remote_tools``. The last line printed is one JSON object: scenario name →
what it saw (or ``{"error": traceback}``). Remote, the tools are built over the blocking
``Client`` (and once over ``AsyncClient``), and the run ends by listing which server-side
modules were imported (none should be).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import tempfile
import traceback
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from strands import Agent
from strands.models import Model
from strands.session.file_session_manager import FileSessionManager

from toolkeeper.adapters.strands import (
    Reject,
    build_async,
    pending_approvals,
    resolve_interrupts,
    resolve_interrupts_sync,
    tools_of,
)
from toolkeeper.toolbox import Toolbox, build_tools

SERVER_SIDE = ("toolkeeper.gateway", "toolkeeper.store", "toolkeeper.pipeline", "sqlalchemy",
               "fastapi", "mcp")
Call = tuple[str, Any, str]


class Script(Model):
    """A model that makes ``calls`` (name, input, tool use id) on its first turn, then
    answers with what each call returned, as JSON ``{toolUseId: content}``. An input given
    as a string is streamed as is (it may not be JSON)."""

    def __init__(self, calls: Sequence[Call]) -> None:
        self.calls = calls
        self.seen_specs: list[Any] = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None,
                     **kwargs: Any) -> AsyncGenerator[Any, None]:
        self.seen_specs[:] = tool_specs or []
        results = {c["toolResult"]["toolUseId"]: c["toolResult"]
                   for c in messages[-1]["content"] if "toolResult" in c}
        yield {"messageStart": {"role": "assistant"}}
        if results:
            told = {k: _told(r) for k, r in results.items()}
            yield {"contentBlockDelta": {"delta": {"text": json.dumps(told)}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        for name, args, use_id in self.calls:
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": use_id,
                                                               "name": name}}}}
            text = args if isinstance(args, str) else json.dumps(args)
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": text}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def _told(result: dict[str, Any]) -> Any:
    text = "".join(c.get("text", "") for c in result["content"])
    try:
        return {"status": result["status"], "said": json.loads(text)}
    except ValueError:
        return {"status": result["status"], "said": text}


def agent_of(tools: list[Any], calls: Sequence[Call], **kwargs: Any) -> Agent:
    return Agent(model=Script(calls), tools=tools, callback_handler=None, **kwargs)


def said(result: Any) -> dict[str, Any]:
    """What the scripted model was told, by tool use id (its final text)."""
    told: dict[str, Any] = json.loads(str(result).strip())
    return told


def conversation(agent: Agent) -> str:
    return str(agent.state.get("toolkeeper")["conversation"])


class Run:
    """One mode's scenarios: the agent's toolbox, the approver's token, the agent's token,
    the toolbox of an agent whose profile denies everything, and one of an agent the server
    does not know (remote: a token it refuses)."""

    def __init__(self, box: Toolbox, tokens: dict[str, str], blocked: Toolbox,
                 stranger: Toolbox) -> None:
        self.box = box
        self.tokens = tokens
        self.blocked = blocked
        self.stranger = stranger
        self.tools = build_tools(box, framework="strands")

    def schemas(self) -> Any:
        script = Script([("lookup", {"city": "Oslo"}, "c1")])
        Agent(model=script, tools=self.tools, callback_handler=None)("weather?")
        return {s["name"]: s["inputSchema"]["json"] for s in script.seen_specs}

    def allowed_and_denied(self) -> Any:
        result = agent_of(self.tools, [("lookup", {"city": "Oslo"}, "c1"),
                                       ("transfer", {"account": "big", "amount": 5000},
                                        "c2")])("weather, and pay 5000")
        return {"stop": result.stop_reason, "told": said(result)}

    def _paused(self, account: str, **kwargs: Any) -> tuple[Agent, Any]:
        agent = agent_of(self.tools, [("transfer", {"account": account, "amount": 50}, "c1")],
                         **kwargs)
        return agent, agent("pay 50")

    def approved_runs_once(self, tmp: str) -> Any:
        """Paused, approved, resumed; then the paused agent restored from its session and
        resumed again (a retried resume): deduplicated, not executed twice."""
        session = {"session_id": "s-approve", "storage_dir": tmp}
        agent, first = self._paused("acct-approve", agent_id="bot",
                                    session_manager=FileSessionManager(**session))
        asks = pending_approvals(first)
        (interrupt_id, ask), = asks.items()
        status = self.box.approval_sync(ask["approval_id"]).status
        responses = resolve_interrupts_sync(self.box, first, {interrupt_id: True},
                                            approver=self.tokens["approver"])
        restored = agent_of(self.tools, [], agent_id="bot",
                            session_manager=FileSessionManager(**session))
        resumed = agent(responses)
        again = restored(responses)
        return {"stop": first.stop_reason, "names": [i.name for i in first.interrupts or ()],
                "ask": ask, "status_paused": str(status), "told": said(resumed),
                "told_again": said(again), "conversation": conversation(agent),
                "status_after": str(self.box.approval_sync(ask["approval_id"]).status)}

    def rejected(self) -> Any:
        agent, first = self._paused("acct-reject")
        (interrupt_id, ask), = pending_approvals(first).items()
        responses = resolve_interrupts_sync(self.box, first,
                                            {interrupt_id: Reject("not before the audit")},
                                            approver=self.tokens["approver"])
        return {"told": said(agent(responses)),
                "status": str(self.box.approval_sync(ask["approval_id"]).status)}

    def agent_cannot_approve(self) -> Any:
        agent, first = self._paused("acct-self")
        (interrupt_id, ask), = pending_approvals(first).items()
        try:
            resolve_interrupts_sync(self.box, first, {interrupt_id: True},
                                    approver=self.tokens["bot"])
            refused = None
        except Exception as exc:  # the refusal is what this scenario reports
            refused = str(getattr(exc, "reason", type(exc).__name__))
        answered = [{"interruptResponse": {"interruptId": interrupt_id,
                                           "response": {"approve": True}}}]
        return {"refused": refused,  # and approving only in Strands runs nothing
                "told": said(agent(answered)),
                "status": str(self.box.approval_sync(ask["approval_id"]).status)}

    def superseded(self) -> Any:
        agent, first = self._paused("acct-superseded")
        (interrupt_id, ask), = pending_approvals(first).items()
        responses = resolve_interrupts_sync(self.box, first, {interrupt_id: True},
                                            approver=self.tokens["approver"])
        self.box.supersede_sync(ask["turn_group_id"])
        return {"told": said(agent(responses))}

    def rerun_dedupes(self) -> Any:
        calls = [("post_note", {"text": "note-rerun"}, "c1")]
        agent = agent_of(self.tools, calls)
        run = agent("tell the team")
        # the same conversation (its state) asks for the same tool use again: one note
        retry = agent_of(self.tools, calls, state=agent.state.get())("tell the team")
        return {"told": said(run), "told_again": said(retry)}

    def turn_groups(self) -> Any:
        named = agent_of(self.tools, [("post_note", {"text": "note-turn-a"}, "c1"),
                                      ("post_note", {"text": "note-turn-b"}, "c2")])
        named("notes", invocation_state={"turn_group_id": "msg-42"})
        plain = agent_of(self.tools, [("post_note", {"text": "note-turn-c"}, "c1"),
                                      ("post_note", {"text": "note-turn-d"}, "c2")])
        plain("notes")
        return {"named": conversation(named), "plain": conversation(plain)}

    def malformed(self) -> Any:
        cases = [("transfer", "{not json"), ("transfer", "[1, 2]"), ("lookup", {"city": 5}),
                 ("lookup", {"town": "Oslo"}), ("transfer", {"account": "m", "amount": "lots"})]
        return [said(agent_of(self.tools, [(name, args, "c1")])("go"))["c1"]
                for name, args in cases]

    def preview_and_confirm(self) -> Any:
        agent = agent_of(self.tools, [("send_email", {"to": "ops-pc", "body": "hi"}, "c1"),
                                      ("deploy", {"service": "svc-pc"}, "c2")])
        first = agent("mail ops, then deploy")
        asks = pending_approvals(first)
        responses = resolve_interrupts_sync(self.box, first, dict.fromkeys(asks, True),
                                            approver=self.tokens["approver"])
        return {"asks": sorted(asks.values(), key=lambda a: a["tool"]),
                "told": said(agent(responses))}

    def rejected_preview(self) -> Any:
        agent = agent_of(self.tools, [("send_email", {"to": "ops-rp", "body": "hi"}, "c1")])
        first = agent("mail ops")
        responses = resolve_interrupts_sync(self.box, first,
                                            dict.fromkeys(pending_approvals(first), False),
                                            approver=self.tokens["approver"])
        return {"told": said(agent(responses))}

    def denies_everything(self) -> Any:
        """An agent whose profile denies everything is given no tools; tools built while
        they were allowed (its profile changed since) have every call refused."""
        built = build_tools(self.blocked, framework="strands")
        tools = tools_of(self.box.enabled_sync(), self.blocked)
        result = agent_of(tools, [("lookup", {"city": "Oslo"}, "c1"),
                                  ("post_note", {"text": "note-blocked"}, "c2"),
                                  ("transfer", {"account": "blocked", "amount": 5}, "c3")])("go")
        return {"built": [t.tool_name for t in built], "stop": result.stop_reason,
                "interrupts": len(result.interrupts or ()), "told": said(result)}

    def refuses_the_agent(self) -> Any:
        """Building for an agent the server refuses fails, naming why; tools built before
        (its token revoked since) have every call told so."""
        try:
            build_tools(self.stranger, framework="strands")
            refused = None
        except Exception as exc:  # the refusal is what this scenario reports
            refused = str(getattr(exc, "reason", type(exc).__name__))
        tools = tools_of(self.box.enabled_sync(), self.stranger)
        result = agent_of(tools, [("post_note", {"text": "note-stranger"}, "c1")])("go")
        return {"refused": refused, "stop": result.stop_reason, "told": said(result)}


def scenarios(run: Run, tmp: str) -> dict[str, Callable[[], Any]]:
    return {"schemas": run.schemas, "allowed_and_denied": run.allowed_and_denied,
            "approved_runs_once": lambda: run.approved_runs_once(tmp),
            "rejected": run.rejected, "agent_cannot_approve": run.agent_cannot_approve,
            "superseded": run.superseded, "rerun_dedupes": run.rerun_dedupes,
            "turn_groups": run.turn_groups, "malformed": run.malformed,
            "preview_and_confirm": run.preview_and_confirm,
            "rejected_preview": run.rejected_preview,
            "denies_everything": run.denies_everything,
            "refuses_the_agent": run.refuses_the_agent}


def run_all(run: Run) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, scenario in scenarios(run, tmp).items():
            try:
                seen[name] = scenario()
            except Exception:  # reported, so one broken scenario does not hide the rest
                seen[name] = {"error": traceback.format_exc()}
    return seen


async def over_async_client(url: str, tokens: dict[str, str]) -> Any:
    """``AsyncClient`` + ``build_async`` + ``await agent.invoke_async`` (one event loop)."""
    from toolkeeper.client import AsyncClient

    async with AsyncClient(url, tokens["bot"], timeout=10) as client:
        box = client.toolbox("bot")
        agent = agent_of(await build_async(box),
                         [("transfer", {"account": "acct-async", "amount": 50}, "c1")])
        first = await agent.invoke_async("pay 50")
        responses = await resolve_interrupts(box, first, dict.fromkeys(
            pending_approvals(first), True), approver=tokens["approver"])
        return said(await agent.invoke_async(responses))


def server_down(infos: list[Any], token: str) -> Any:
    """Building over a server that is down fails, bounded, naming why; tools built before
    it went down have every call told ``unavailable``."""
    from toolkeeper.client import Client

    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", token, timeout=2) as down:
        box = down.toolbox("bot")
        try:
            build_tools(box, framework="strands")
            refused = None
        except Exception as exc:  # the refusal is what this scenario reports
            refused = str(getattr(exc, "reason", type(exc).__name__))
        result = agent_of(tools_of(infos, box), [("post_note", {"text": "note-down"}, "c1")])(
            "go")
    return {"refused": refused, "stop": result.stop_reason, "told": said(result)}


def remote(url: str, tokens: dict[str, str]) -> dict[str, Any]:
    from toolkeeper.client import Client

    with Client(url, tokens["bot"], timeout=10) as bot, \
            Client(url, tokens["blocked"], timeout=10) as blocked, \
            Client(url, "tk_revoked_or_never_issued", timeout=10) as stranger:
        seen = run_all(Run(bot.toolbox("bot"), tokens, blocked.toolbox("blocked"),
                           stranger.toolbox("bot")))
        seen["server_down"] = server_down(bot.toolbox("bot").enabled_sync(), tokens["bot"])
    seen["async_client"] = asyncio.run(over_async_client(url, tokens))
    seen["server_modules"] = [m for m in SERVER_SIDE if m in sys.modules]
    return seen


def inprocess(db: str, tokens: dict[str, str], config: str) -> dict[str, Any]:
    from toolkeeper import Gateway
    from toolkeeper.toolbox import InProcessBackend

    with Gateway.open(db, config=config) as gw:
        backend = InProcessBackend(gw)
        return run_all(Run(Toolbox(backend, agent="bot"), tokens,
                           Toolbox(backend, agent="blocked"), Toolbox(backend, agent="nobody")))


if __name__ == "__main__":
    mode, target, tokens = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    seen = remote(target, tokens) if mode == "remote" else inprocess(target, tokens,
                                                                     sys.argv[4])
    print(json.dumps(seen, default=str))
