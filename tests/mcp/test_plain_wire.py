"""``results.plain_wire`` gives exactly what the SDK's own serialisation of ``results.wire``
gives (key order included), for every protocol version, or declines: each result below is
sent both ways."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import methods as sdk_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from toolkeeper.mcp import results
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus

TEXT = {"type": "text", "text": "hi"}
OUTPUTS: list[Any] = [5, "text", None, True, 1.5, [1, "a", None], {"a": 1, "b": None},
                      {"nested": {"list": [{}, []]}}, {}]
MCP: list[dict[str, Any]] = [
    {"content": [TEXT]},
    {"content": [TEXT, {"type": "text", "text": ""}], "structuredContent": {"x": [1, None]}},
    {"content": []},
    {"content": [TEXT], "structuredContent": {}},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}]},
    {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
    {"content": [TEXT, {"type": "resource_link", "uri": "file:///a", "name": "a"}]},
]
VERSIONS = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]


def _results() -> list[CallResult]:
    out = [CallResult(call_id="c", status=CallStatus.SUCCEEDED, tool="t", output=o)
           for o in OUTPUTS]
    out += [CallResult(call_id="c", status=CallStatus.SUCCEEDED, tool="t", mcp=m) for m in MCP]
    out += [CallResult(call_id="c", status=s, tool="t", reason="r", message="m")
            for s in (CallStatus.DENIED, CallStatus.FAILED, CallStatus.APPROVAL_REQUIRED)]
    return out


CASES = [(r, v) for r in _results() for v in VERSIONS]


@pytest.mark.parametrize(("result", "version"), CASES,
                         ids=[f"{i}-{v}" for i, (_, v) in enumerate(CASES)])
def test_the_plain_wire_is_the_sdks_serialisation_or_nothing(result: CallResult,
                                                             version: str) -> None:
    plain = results.plain_wire(result, version)
    if plain is None:
        return
    dumped = results.wire(result).model_dump(by_alias=True, mode="json", exclude_none=True)
    expected = sdk_methods.serialize_server_result("tools/call", version, dumped)
    assert plain == expected
    assert list(plain) == list(expected)  # the same bytes on the wire
    assert [list(b) for b in plain["content"]] == [list(b) for b in expected["content"]]


def test_plain_results_take_the_plain_wire_in_the_current_eras() -> None:
    for version in ("2025-11-25", "2026-07-28"):
        taken = [r for r in _results() if results.plain_wire(r, version) is not None]
        assert len(taken) == len(OUTPUTS) + 4  # the text-only passthroughs too
