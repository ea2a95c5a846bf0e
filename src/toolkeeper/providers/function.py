"""``function`` provider: an allow-listed server-side function, looked up by name."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from toolkeeper.errors import UserError
from toolkeeper.providers.base import NoPreview, ToolContext, ToolPolicy


class UsesFunctions:
    """A built-in that calls functions of the operator's allow-list by name.

    The provider factory builds it with a read-only view of that allow-list (config
    ``functions:``, ``Gateway.open(functions=…)``) and nothing else; it takes no other
    constructor arguments."""

    def __init__(self, functions: Mapping[str, Callable[..., Any]]) -> None:
        self.functions = functions


class FunctionProvider(NoPreview):
    """Calls ``functions[name](**arguments)``: sync in a worker thread, async awaited."""

    policy_model = ToolPolicy

    def __init__(self, name: str, functions: Mapping[str, Callable[..., Any]]) -> None:
        if name not in functions:
            raise UserError(f"function {name!r} is not in the function allow-list")
        self._fn = functions[name]
        self._async = inspect.iscoroutinefunction(self._fn)
        self._wants_ctx = "ctx" in inspect.signature(self._fn).parameters

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs = {**arguments, "ctx": ctx} if self._wants_ctx else dict(arguments)
        if self._async:
            return await self._fn(**kwargs)
        return await asyncio.to_thread(self._fn, **kwargs)
