"""What the two MCP lean-path differentials (stateless, and on 2025-11-25 sessions) share:
the spy that counts what the lean path answers itself, the body and audit records of one
side, the verdict on both sides, and the ways their tests break the lean path on purpose."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.audit_diff import Mark, written_since
from toolkeeper import Gateway
from toolkeeper.mcp import lean

SDK_REFUSES = "malformed: the SDK's own error answers it"
NEEDS_SDK = "needs what only the SDK does"

ANSWERED: list[str] = []
"""The methods the lean path answered itself, in order (the server runs in this process)."""


def counted(real: Any) -> Any:
    """``lean.answer`` counting into :data:`ANSWERED`."""
    async def answer(face: Any, who: Any, job: Any) -> Any:
        ANSWERED.append(job.method)
        return await real(face, who, job)
    return answer


def as_sent(body: Any, side: str) -> Any:
    """The body as ``side`` sends it: a ``$path`` in it becomes the side's name, so calls
    that leave state (a pending approval) do not meet each other's."""
    return body if isinstance(body, bytes) else json.loads(
        json.dumps(body).replace("$path", side))


def written(gw: Gateway, since: Mark, side: str, sent: Any) -> Any:
    """The audit records ``side`` wrote for ``sent``, normalised."""
    params = sent.get("params") if isinstance(sent, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    return written_since(gw, since, sides=(side,), arguments=arguments)


def check_took(before: int, side: str, *, lean: bool, on: bool) -> None:
    """The lean path answered since ``before`` iff it must (``lean``) and was on."""
    took = ANSWERED[before:]
    assert bool(took) == (lean and on), \
        f"the {side} side: the lean path answered {took or 'nothing'}"


def same(answers: list[dict[str, Any]], records: list[Any]) -> dict[str, Any]:
    """Both sides' answers are equal, and so are the audit records each wrote."""
    assert answers[0] == answers[1], json.dumps(answers, indent=1, sort_keys=True)
    assert records[0] == records[1], "audit records differ: " + json.dumps(
        records, indent=1, sort_keys=True, default=str)
    return answers[0]


# -- breaking the lean path on purpose ----------------------------------------------------

Change = Callable[[Any, Any, Any, Any], Awaitable[Any]]


def breaking(monkeypatch: pytest.MonkeyPatch, change: Change) -> None:
    """The lean path's answer step (the counting spy) run with ``change`` applied to what
    it sends the pipeline or what it answers."""
    counting = lean.answer

    async def broken(face: Any, who: Any, job: Any) -> Any:
        return await change(counting, face, who, job)
    monkeypatch.setattr(lean, "answer", broken)


async def own_task_id(counting: Any, face: Any, who: Any, job: Any) -> Any:
    """A :data:`Change`: the lean path gives the pipeline a call with a task id of its own
    (the answers are still the same, only the audit records show it)."""
    real = face.gw.call_served

    async def call_served(request: Any, principal: Any) -> Any:
        return await real(dataclasses.replace(request, task_id="lean"), principal)
    face.gw.call_served = call_served
    try:
        return await counting(face, who, job)
    finally:
        del face.gw.call_served
