"""The REST test client: an app under test, its gateway, and a bearer token per role.

The fixture modules of ``tests/api`` build the gateway and the tokens; every test speaks
through :class:`RestClient`, so a request reads the same in every suite:
``api.get("admin", "/tools")``, ``api.execute("bot", "add", {"a": 1, "b": 2})``,
``api.call("DELETE", path, who=None)`` (no credentials).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import EllipsisType
from typing import Any

import httpx2
from fastapi.testclient import TestClient

from toolkeeper import Gateway


@dataclass(kw_only=True)
class RestClient:
    """``who`` is a key of ``tokens`` (a role or agent the fixture named) or a raw token."""

    gw: Gateway
    client: TestClient
    tokens: dict[str, str]
    tenant: str = "default"
    """The tenant the fixture's unqualified tool names belong to (see :meth:`tool_id`)."""

    def auth(self, who: str) -> dict[str, str]:
        """The ``Authorization`` header of ``who``."""
        return {"Authorization": f"Bearer {self.tokens.get(who, who)}"}

    def call(self, method: str, path: str, who: str | None = "admin",
             **kwargs: Any) -> httpx2.Response:
        """Any request as ``who`` (``None``: without credentials); ``kwargs`` go to httpx2."""
        headers = {**(self.auth(who) if who is not None else {}),
                   **(kwargs.pop("headers", None) or {})}
        return self.client.request(method, path, headers=headers, **kwargs)

    def get(self, who: str, path: str, **params: Any) -> httpx2.Response:
        return self.client.get(path, params=params, headers=self.auth(who))

    def post(self, who: str, path: str, body: Any = None, **params: Any) -> httpx2.Response:
        return self.client.post(path, json=body, params=params, headers=self.auth(who))

    def put(self, who: str, path: str, body: Any) -> httpx2.Response:
        return self.client.put(path, json=body, headers=self.auth(who))

    def execute(self, who: str, tool: str, arguments: Any = None,
                headers: dict[str, str] | None = None, **fields: Any) -> httpx2.Response:
        """``POST /tools/execute`` of ``tool`` with ``arguments`` and any other body ``fields``."""
        body = {"tool": tool, "arguments": {} if arguments is None else arguments, **fields}
        return self.client.post("/tools/execute", json=body,
                                headers={**self.auth(who), **(headers or {})})

    def tool_id(self, name: str, tenant: str | EllipsisType | None = ...) -> str:
        """The id of tool ``name`` of ``tenant`` (default: :attr:`tenant`; ``None``: global)."""
        owner = self.tenant if tenant is ... else tenant
        rec = self.gw.store.registry.tool(name, owner)
        assert rec is not None and rec[1].tenant_id == owner, (name, owner)
        return rec[0]


def assert_error(resp: httpx2.Response, status: int, reason: str) -> dict[str, Any]:
    """``resp`` is the SPEC §7 error shape with ``status`` and ``reason``; its ``error``."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert set(err) == {"reason", "message", "details"}, err
    assert err["reason"] == reason, err
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["details"], dict)
    return err
