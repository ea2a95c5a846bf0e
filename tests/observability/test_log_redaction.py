"""SPEC §8 "secrets never logged", for library users: ``Gateway.open`` masks secrets in
every record of the logging handlers configured by then — the gateway's current secret
values (after a change too) and the values a running call resolved, even from a store that
cannot list its values — and ``close`` takes the masking off again."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from toolkeeper import (
    ActionSpec,
    Activation,
    Agent,
    Autonomy,
    BaseTool,
    Gateway,
    Profile,
    Risk,
    SideEffect,
)
from toolkeeper.observability.logs import JsonFormatter
from toolkeeper.providers.base import ToolContext
from toolkeeper.secrets.env import EnvSecretsStore

HIDDEN = "vault-only-Value-7781-xyz"
"""Handed out by a store that cannot enumerate its values (like Vault)."""
KNOWN = "env-known-Value-5521-abc"


class VaultLike:
    """A secrets store that resolves values but cannot list them for redaction."""

    async def get_secret(self, connector_id: str | None, key: str) -> str:
        return HIDDEN

    def known_values(self) -> frozenset[str]:
        return frozenset()


class AsyncLeak(BaseTool):
    """Resolves a secret, then logs it (here and on a worker thread) and raises with it
    (caught and logged)."""

    tool_name = "async_leak"
    side_effect: ClassVar[SideEffect] = SideEffect.PURE
    risk_default: ClassVar[Risk] = Risk.LOW

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        value = await context.secret("token")
        log = logging.getLogger("some.lib")
        log.warning("token=%s", value)
        await asyncio.to_thread(log.warning, "in a thread: %s", value)
        try:
            raise RuntimeError(f"refused {value}")
        except RuntimeError:
            log.exception("call failed", extra={"header": f"Bearer {value}"})
        return "ok"


class ThreadLeak(BaseTool):
    """Sync tool (runs on a worker thread) that logs its argument inside a dict."""

    tool_name = "thread_leak"
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(input_schema={
        "type": "object", "properties": {"echo": {"type": "string"}}})}
    side_effect: ClassVar[SideEffect] = SideEffect.PURE
    risk_default: ClassVar[Risk] = Risk.LOW

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        logging.getLogger("other.lib").error("sync saw %r", {"auth": request["echo"]})
        return "ok"


@contextmanager
def captured(json: bool = False) -> Iterator[io.StringIO]:
    """A handler on the root logger (as an application configures one), for the test."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    if json:
        handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield out
    finally:
        root.removeHandler(handler)


def _open(tmp_path: Path, secrets: Any) -> Gateway:
    gw = Gateway.open(f"sqlite:///{tmp_path}/tk.db", secrets=secrets)
    for t in (AsyncLeak, ThreadLeak):
        gw.registry.register(t)
    gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(3), activations=(
        Activation(tool="async_leak"), Activation(tool="thread_leak"))))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    return gw


def test_a_secret_a_call_resolved_is_masked_in_what_tool_code_logs(tmp_path: Path) -> None:
    for json in (False, True):
        (tmp_path / str(json)).mkdir()
        with captured(json) as out, _open(tmp_path / str(json), VaultLike()) as gw:
            assert gw.call_sync("async_leak", agent="bot").output == "ok"
        text = out.getvalue()
        assert HIDDEN not in text, text
        assert "token=***" in text and "RuntimeError: refused ***" in text
        assert "in a thread: ***" in text
        assert "Bearer ***" in text or json is False  # extra fields: JSON shows them


def test_the_gateways_current_secrets_are_masked_after_they_change(tmp_path: Path) -> None:
    environ: dict[str, str] = {}
    with captured() as out, _open(tmp_path, EnvSecretsStore(environ)) as gw:
        environ["TOOLKEEPER_SECRET_TOKEN"] = KNOWN
        gw.refresh_secrets()  # a new value: the filter reads the new redactor
        logging.getLogger("app").warning("outside any call: %s", KNOWN)
        res = gw.call_sync("thread_leak", arguments={"echo": KNOWN}, agent="bot")
        assert res.status.value == "succeeded"
    text = out.getvalue()
    assert KNOWN not in text, text
    assert "outside any call: ***" in text and "sync saw {'auth': '***'}" in text


def test_close_takes_the_masking_off(tmp_path: Path) -> None:
    environ = {"TOOLKEEPER_SECRET_TOKEN": KNOWN}
    with captured() as out:
        gw = _open(tmp_path, EnvSecretsStore(environ))
        logging.getLogger("app").warning("open: %s", KNOWN)
        gw.close()
        logging.getLogger("app").warning("closed: %s", KNOWN)
    assert out.getvalue().splitlines() == ["open: ***", f"closed: {KNOWN}"]

