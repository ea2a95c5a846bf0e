"""Tools the adapters' ``toolkeeper serve`` loads as ``tests.adapters.remote_tools:…``.

The same names and schemas as the in-process adapter tests' tools, so their scripted models
drive both. Each irreversible execution appends ``<first argument>`` as one line to
``$TOOLKEEPER_TEST_LEDGER/<tool>.log``: the test process counts executions there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from toolkeeper import Risk, SideEffect, tool


def _count(name: str, mark: str) -> None:
    with (Path(os.environ["TOOLKEEPER_TEST_LEDGER"]) / f"{name}.log").open("a") as fh:
        fh.write(f"{mark}\n")


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def lookup(city: str) -> dict[str, Any]:
    """Look up the weather of a city."""
    return {"city": city, "sky": "clear"}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
def transfer(account: str, amount: int) -> dict[str, Any]:
    """Transfer money to an account."""
    _count("transfer", account)
    return {"transferred": amount, "to": account}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def post_note(text: str) -> dict[str, Any]:
    """Post a note to the team channel."""
    _count("post_note", text)
    return {"posted": text}


def _email_preview(to: str, body: str) -> str:
    return f"email {to}: {body[:40]}"


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, preview=_email_preview)
def send_email(to: str, body: str) -> dict[str, Any]:
    """Send an email."""
    _count("send_email", to)
    return {"sent_to": to}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, requires_confirmation=True)
def deploy(service: str) -> dict[str, Any]:
    """Deploy a service."""
    _count("deploy", service)
    return {"deployed": service}
