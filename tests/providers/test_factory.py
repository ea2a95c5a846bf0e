"""The provider factory (security): a tool a tenant defined through the API (``origin ==
"api"``) runs only code the operator registered — it never imports a module and never
passes constructor arguments — and no build error carries the repr of an object."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import BaseTool, ToolContext
from toolkeeper.errors import UserError
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.factory import EntryPointNotAllowed, ProviderFactory
from toolkeeper.providers.native import NativeProvider

CANARY = "canary-0c8e2f61d7b3"


class Registered(BaseTool):
    tool_name = "registered"

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return "ok"


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """``(module, marker)``: a throwaway module on ``sys.path`` that writes ``marker``."""
    name = f"tk_probe_{uuid.uuid4().hex}"
    marker = tmp_path / "probe-imported"
    (tmp_path / f"{name}.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\ns = 'zen'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    sys.modules.pop(name, None)


def _native(ref: str, origin: str, **impl: Any) -> ToolDefinition:
    return ToolDefinition(name="t", implementation_type="native", origin=origin,  # type: ignore[arg-type]
                          implementation={"entry_point": ref, **impl})


def test_an_api_tool_never_imports_its_entry_point(probe: tuple[str, Path]) -> None:
    module, marker = probe
    factory = ProviderFactory()
    with pytest.raises(EntryPointNotAllowed) as caught:
        factory(_native(f"{module}:s", "api"))
    assert caught.value.reason == Reason.ENTRY_POINT_NOT_ALLOWED
    assert module not in sys.modules and not marker.exists()


def test_an_api_tool_runs_an_operator_registered_native() -> None:
    factory = ProviderFactory(natives={"ops.tools:Registered": Registered})
    provider = factory(_native("ops.tools:Registered", "api"))
    assert isinstance(provider, NativeProvider) and isinstance(provider.tool, Registered)


@pytest.mark.parametrize("tool", [
    _native("ops.tools:Registered", "api", init={"x": 1}),
    ToolDefinition(name="t", implementation_type="builtin", origin="api", builtin_key="calculate",
                   implementation={"init": {"policy": None}}),
    ToolDefinition(name="t", implementation_type="artifact", origin="api"),
])
def test_an_api_tool_gets_no_constructor_arguments_and_no_artifact(tool: ToolDefinition) -> None:
    from toolkeeper.builtins import BUILTINS

    factory = ProviderFactory(natives={"ops.tools:Registered": Registered}, builtins=BUILTINS)
    with pytest.raises(EntryPointNotAllowed):
        factory(tool)


def test_an_operator_tool_still_loads_its_entry_point(probe: tuple[str, Path]) -> None:
    module, marker = probe
    with pytest.raises(UserError):  # imported (the operator's code), but not a tool
        ProviderFactory()(_native(f"{module}:s", "config"))
    assert marker.exists()


def test_a_build_error_names_the_type_never_the_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TK_FACTORY_CANARY", CANARY)
    with pytest.raises(UserError) as caught:
        ProviderFactory()(_native("os:environ", "config"))
    message = str(caught.value)
    assert CANARY not in message and "environ(" not in message
    assert "os:environ" in message and "_Environ" in message
