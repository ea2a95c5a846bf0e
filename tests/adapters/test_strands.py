"""The Strands adapter in a real Strands agent loop (issue 29 item 2), in-process and against
a real ``toolkeeper serve``: ``strands_scenarios.py`` runs under ``.venv-strands`` (Strands
cannot share the project venv) with a scripted ``Model``, once per mode, and prints what the
model was told; these tests assert on that, on the executions counted on the tool side
(the ledger ``tests.adapters.remote_tools`` appends to) and on the store's records.

Allowed, denied, approve-gated (paused with a Strands interrupt, approved with the
approver's token, resumed, executed once, and once more from the agent's session: deduped),
rejected, approved by the agent's own token (refused) or only in Strands (nothing runs),
superseded, re-run, malformed, previewed, confirmed, and an agent whose profile denies
everything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.remote_support import CONFIG
from tests.adapters.strands_support import run_strands, strands_python
from tests.support.serve import TokenSpec, _tokens, serving_toolkeeper
from toolkeeper.store import Store
from toolkeeper.store.records import OutcomeRecord

pytestmark = pytest.mark.slow  # Strands in its own venv, and a real server: CI, make test-all

SCENARIOS = Path(__file__).with_name("strands_scenarios.py")
# "blocked": the agent of the server that denies everything (profile "nothing")
TOKENS = {"bot": TokenSpec("agent", "bot"), "blocked": TokenSpec("agent", "blocked"),
          "approver": TokenSpec("approver")}
TOOLS = {"lookup", "transfer", "post_note", "send_email", "deploy"}


@dataclass(frozen=True)
class Ran:
    """What one mode's scenarios printed, and where to look on the tool side."""

    mode: str
    seen: dict[str, Any]
    db: str
    ledger: Path

    def __getitem__(self, scenario: str) -> Any:
        got = self.seen[scenario]
        assert not (isinstance(got, dict) and "error" in got), got.get("error")
        return got

    def executions(self, tool: str, mark: str) -> int:
        log = self.ledger / f"{tool}.log"
        return log.read_text().splitlines().count(mark) if log.exists() else 0

    def outcomes(self, tool: str) -> list[OutcomeRecord]:
        store = Store.open(self.db)
        try:
            return [o for o in store.outcomes.list("default", limit=500) if o.tool == tool]
        finally:
            store.close()


def _ran(mode: str, args: list[str], db: str, ledger: Path) -> Ran:
    done = run_strands(str(SCENARIOS), mode, *args, server=mode == "inprocess",
                       TOOLKEEPER_TEST_LEDGER=str(ledger))
    assert done.returncode == 0, done.stderr[-4000:]
    return Ran(mode, json.loads(done.stdout.splitlines()[-1]), db, ledger)


@pytest.fixture(scope="module", params=["inprocess", "remote"])
def ran(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    strands_python()  # skips (or fails under CI=true) before any server starts
    work = tmp_path_factory.mktemp(f"strands-{request.param}")
    ledger = work / "ledger"
    ledger.mkdir()
    if request.param == "inprocess":
        db, config = f"sqlite:///{work}/tk.db", work / "toolkeeper.yaml"
        config.write_text(CONFIG)
        tokens = _tokens(db, config, TOKENS)
        yield _ran("inprocess", [db, json.dumps(tokens), str(config)], db, ledger)
        return
    with serving_toolkeeper(work, CONFIG, TOKENS,
                            TOOLKEEPER_TEST_LEDGER=str(ledger)) as server:
        yield _ran("remote", [server.url, json.dumps(server.tokens)], server.db, ledger)


def test_tools_are_the_enabled_actions_with_their_schemas(ran: Ran) -> None:
    schemas = ran["schemas"]
    assert set(schemas) == TOOLS
    assert schemas["transfer"]["required"] == ["account", "amount"]
    assert schemas["transfer"]["properties"]["amount"]["type"] == "integer"


def test_allowed_and_denied_calls_reach_the_model(ran: Ran) -> None:
    seen = ran["allowed_and_denied"]
    assert seen["stop"] == "end_turn"
    assert seen["told"]["c1"] == {"status": "success", "said": {"city": "Oslo", "sky": "clear"}}
    denied = seen["told"]["c2"]
    assert denied["status"] == "error"
    assert (denied["said"]["status"], denied["said"]["reason"], denied["said"]["tool"]) == (
        "denied", "gate_denied", "transfer")
    assert ran.executions("transfer", "big") == 0


def test_an_approve_gate_pauses_and_the_approved_call_runs_once(ran: Ran) -> None:
    seen = ran["approved_runs_once"]
    assert (seen["stop"], seen["names"]) == ("interrupt", ["toolkeeper"])
    ask = seen["ask"]
    assert (ask["kind"], ask["tool"], ask["arguments"]) == (
        "approve", "transfer", {"account": "acct-approve", "amount": 50})
    assert seen["status_paused"] == "pending"
    paid = {"c1": {"status": "success", "said": {"transferred": 50, "to": "acct-approve"}}}
    # resumed, then the paused agent restored from its session resumed again: one transfer
    assert seen["told"] == seen["told_again"] == paid
    assert ran.executions("transfer", "acct-approve") == 1
    assert seen["status_after"] == "consumed"
    (outcome,) = [o for o in ran.outcomes("transfer")
                  if (o.result or {}).get("output", {}).get("to") == "acct-approve"]
    assert outcome.key.endswith(f"strands:{seen['conversation']}:c1")
    assert outcome.turn_group_id == ask["turn_group_id"]


def test_a_rejected_call_tells_the_model_and_never_runs(ran: Ran) -> None:
    seen = ran["rejected"]
    told = seen["told"]["c1"]
    assert told["status"] == "error"
    assert (told["said"]["status"], told["said"]["reason"]) == ("denied", "approval_denied")
    assert "not before the audit" in told["said"]["message"]
    assert seen["status"] == "denied"
    assert ran.executions("transfer", "acct-reject") == 0


def test_the_agents_own_token_cannot_approve_nor_can_strands_alone(ran: Ran) -> None:
    seen = ran["agent_cannot_approve"]
    assert seen["refused"] == "approver_not_allowed"
    # an interruptResponse that says approve, but toolkeeper was never told: still gated
    told = seen["told"]["c1"]["said"]
    assert (told["status"], told["reason"]) == ("approval_required", "approval_pending")
    assert seen["status"] == "pending"
    assert ran.executions("transfer", "acct-self") == 0


def test_a_superseded_turn_stops_the_approved_call(ran: Ran) -> None:
    assert ran["superseded"]["told"]["c1"]["said"]["reason"] == "superseded"
    assert ran.executions("transfer", "acct-superseded") == 0


def test_a_rerun_of_the_same_tool_use_dedupes(ran: Ran) -> None:
    seen = ran["rerun_dedupes"]
    posted = {"c1": {"status": "success", "said": {"posted": "note-rerun"}}}
    assert seen["told"] == seen["told_again"] == posted
    assert ran.executions("post_note", "note-rerun") == 1


def test_calls_of_one_invocation_share_its_turn(ran: Ran) -> None:
    ran["turn_groups"]
    turns = {o.result["output"]["posted"]: o.turn_group_id for o in ran.outcomes("post_note")
             if (o.result or {}).get("output", {}).get("posted", "").startswith("note-turn")}
    assert turns["note-turn-a"] == turns["note-turn-b"] == "msg-42"  # invocation_state names it
    assert turns["note-turn-c"] == turns["note-turn-d"] not in (None, "msg-42")


def test_malformed_arguments_come_back_as_invalid_arguments(ran: Ran) -> None:
    for told in ran["malformed"]:
        assert told["status"] == "error"
        said = told["said"]
        assert (said["status"], said["reason"]) == ("denied", "invalid_arguments"), said
        pointers = [e["pointer"] for e in said["details"]["errors"]]
        assert pointers and all(p == "" or p.startswith("/") for p in pointers)
    assert ran.executions("transfer", "m") == 0


def test_a_preview_and_a_confirmation_reach_the_human_and_run_once(ran: Ran) -> None:
    seen = ran["preview_and_confirm"]
    confirm, email = seen["asks"]
    assert (email["kind"], email["preview"]["summary"]) == ("preview", "email ops-pc: hi")
    assert (confirm["kind"], confirm["status"]) == ("confirm", "confirmation_required")
    assert seen["told"] == {"c1": {"status": "success", "said": {"sent_to": "ops-pc"}},
                            "c2": {"status": "success", "said": {"deployed": "svc-pc"}}}
    assert (ran.executions("send_email", "ops-pc"), ran.executions("deploy", "svc-pc")) == (1, 1)


def test_a_rejected_preview_never_runs(ran: Ran) -> None:
    assert ran["rejected_preview"]["told"]["c1"]["said"]["reason"] == "approval_denied"
    assert ran.executions("send_email", "ops-rp") == 0


def test_an_agent_whose_profile_denies_everything(ran: Ran) -> None:
    """It is given no tools; tools built before its profile changed have every call told
    ``gate_denied``: none pauses or runs, and the run goes on to its end."""
    seen = ran["denies_everything"]
    assert seen["built"] == []
    assert (seen["stop"], seen["interrupts"]) == ("end_turn", 0)
    assert {k: (v["status"], v["said"]["reason"]) for k, v in seen["told"].items()} == {
        c: ("error", "gate_denied") for c in ("c1", "c2", "c3")}
    assert ran.executions("post_note", "note-blocked") == ran.executions("transfer", "blocked") == 0


def test_an_agent_the_server_refuses(ran: Ran) -> None:
    seen = ran["refuses_the_agent"]
    assert seen["refused"] == ("unauthenticated" if ran.mode == "remote" else "not_found")
    told = seen["told"]["c1"]
    assert (seen["stop"], told["status"], told["said"]["reason"]) == (
        "end_turn", "error", "unauthenticated")
    assert ran.executions("post_note", "note-stranger") == 0


@pytest.mark.parametrize("ran", ["remote"], indirect=True)  # in-process no server is down
def test_a_server_that_is_down(ran: Ran) -> None:
    seen = ran["server_down"]
    assert seen["refused"] == "unavailable"  # bounded: the client's retries, then this
    told = seen["told"]["c1"]
    assert (seen["stop"], told["status"], told["said"]["status"], told["said"]["reason"]) == (
        "end_turn", "error", "failed", "unavailable")


@pytest.mark.parametrize("ran", ["remote"], indirect=True)
def test_remote_over_the_async_client_and_without_the_server(ran: Ran) -> None:
    assert ran["async_client"] == {
        "c1": {"status": "success", "said": {"transferred": 50, "to": "acct-async"}}}
    assert ran.executions("transfer", "acct-async") == 1
    assert ran["server_modules"] == []
