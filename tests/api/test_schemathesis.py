"""Property-based conformance of the REST face against its own OpenAPI document: for
generated requests, valid and invalid, every operation answers without a 5xx, with a
status code, content type and body its schema declares (SPEC §7: OpenAPI at
``/openapi.json``; bad input gets a clear 4xx with a reason).

Bounded and deterministic: ``derandomize``, no example database, at most 25 examples per
operation and generation mode. (schemathesis' lazy ``from_fixture`` loader does not run
under this pytest, so each operation is driven with its Hypothesis strategy here.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient
from toolkeeper.api import create_app

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
BOUNDED = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))


AGENT_TAGS = {"execution", "calls", "approvals", "ops"}
"""Operations an agent token also drives (as an admin, /tools/execute mostly asks which
agent the call is for; as an agent it runs the pipeline)."""


def _operations() -> list[Any]:
    """Every (token, method, path, mode) to drive; the document needs no gateway. An
    operation without parameters, body or security has nothing to negate."""
    doc = create_app(cast(Any, None)).openapi()
    cases = []
    for path, item in sorted(doc["paths"].items()):
        for method, op in sorted(item.items()):
            modes = [GenerationMode.POSITIVE]
            if op.get("parameters") or op.get("requestBody") or op.get("security"):
                modes.append(GenerationMode.NEGATIVE)
            tokens = ["admin", "bot"] if AGENT_TAGS & set(op.get("tags", ())) else ["admin"]
            cases += [pytest.param(who, method.upper(), path, m,
                                   id=f"{who} {method.upper()} {path} {m}")
                      for who in tokens for m in modes]
    return cases


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestClient]:
    with api_for(tmp_path_factory.mktemp("schemathesis")) as a:
        yield a


@pytest.fixture(scope="module")
def api_schema(api: RestClient) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", api.client.app)


@pytest.mark.parametrize(("who", "method", "path", "mode"), _operations())
def test_operation_conforms_to_its_schema(api: RestClient, api_schema: Any, who: str, method: str,
                                          path: str, mode: GenerationMode) -> None:
    operation = api_schema[path][method]

    @BOUNDED
    @given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case: Any) -> None:
        case.call_and_validate(headers=api.auth(who), checks=CHECKS)

    exercise()
