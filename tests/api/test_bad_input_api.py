"""SPEC §8 (request body cap) and §7 (error shape): bad input gets a clear 4xx with a
stable reason, never a 5xx — oversize bodies, wrong content types, malformed JSON, unknown
fields, wrong types, huge or deep arguments, unknown routes and wrong methods."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper.api import ApiSettings
from toolkeeper.api.limits import MAX_JSON_DEPTH

CAP = 4096


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestClient]:
    # one app for the module: bad input changes nothing (what would is asserted per test)
    with api_for(tmp_path_factory.mktemp("bad"), ApiSettings(max_body_bytes=CAP)) as a:
        yield a


def _post(api: RestClient, path: str = "/tools/execute", **kw: Any) -> Any:
    headers = {**api.auth("bot"), **kw.pop("headers", {})}
    return api.client.post(path, headers=headers, **kw)


def test_declared_oversize_body_is_413(api: RestClient) -> None:
    body = {"tool": "add", "arguments": {"a": 1, "b": 2, "pad": "x" * CAP}}
    assert_error(_post(api, json=body), 413, "payload_too_large")


def test_declared_length_that_is_not_a_number_is_413(api: RestClient) -> None:
    resp = _post(api, content=b"{}", headers={"Content-Type": "application/json",
                                              "Content-Length": "lots"})
    assert resp.status_code in (400, 413)  # refused before the app, never a 5xx


def test_streamed_oversize_body_is_413(api: RestClient) -> None:
    chunk = b'{"tool": "add", "arguments": {"pad": "' + b"x" * 1000

    def chunks() -> Iterator[bytes]:
        for _ in range(CAP // 1000 + 2):
            yield chunk

    resp = _post(api, content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in {k.lower() for k in resp.request.headers}
    assert_error(resp, 413, "payload_too_large")


def test_streamed_body_under_the_cap_is_accepted(api: RestClient) -> None:
    payload = json.dumps({"tool": "add", "arguments": {"a": 1, "b": 2}}).encode()

    def chunks() -> Iterator[bytes]:
        yield payload[:10]
        yield payload[10:]

    resp = _post(api, content=chunks(), headers={"Content-Type": "application/json"})
    assert resp.status_code == 200 and resp.json()["output"] == 3


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x", "application/xml"])
def test_non_json_body_is_415(api: RestClient, ctype: str) -> None:
    resp = _post(api, content=b'{"tool": "add"}', headers={"Content-Type": ctype})
    assert_error(resp, 415, "unsupported_media_type")


def test_body_without_a_content_type_is_415(api: RestClient) -> None:
    resp = _post(api, content=b'{"tool": "add"}')
    assert_error(resp, 415, "unsupported_media_type")


def test_json_with_charset_parameter_is_accepted(api: RestClient) -> None:
    resp = _post(api, content=b'{"tool": "add", "arguments": {"a": 1, "b": 1}}',
                 headers={"Content-Type": "application/json; charset=utf-8"})
    assert resp.status_code == 200


@pytest.mark.parametrize("raw", [b"{", b"{'tool': 'add'}", b'{"tool": "add",}', b"\xff\xfe",
                                 b'{"tool": "add"} trailing'])
def test_malformed_json_is_400(api: RestClient, raw: bytes) -> None:
    resp = _post(api, content=raw, headers={"Content-Type": "application/json"})
    assert_error(resp, 400, "malformed_json")


@pytest.mark.parametrize("path", ["/tools/execute", "/tools/execute-batch",
                                  "/calls/x/resolve", "/approvals/x/approve"])
def test_unknown_fields_are_422_with_their_pointer(api: RestClient, path: str) -> None:
    resp = _post(api, path, json={"tool": "add", "calls": [], "status": "failed",
                                  "surprise": 1}, headers=api.auth("admin"))
    err = assert_error(resp, 422, "invalid_arguments")
    assert "/surprise" in {e["pointer"] for e in err["details"]["errors"]}


@pytest.mark.parametrize("body", [
    {"tool": 7}, {"tool": None}, {"tool": ["add"]}, {"tool": "add", "scopes": "bank"},
    {"tool": "add", "idempotency_key": {"k": 1}}, {"tool": "add", "action": 3},
    {"arguments": {}}, [], "add", 42, None,
])
def test_wrong_body_types_are_422(api: RestClient, body: Any) -> None:
    assert_error(_post(api, json=body), 422, "invalid_arguments")


@pytest.mark.parametrize("arguments", [[1, 2], "a=1", 3, None, True])
def test_non_object_arguments_are_a_422_from_the_pipeline(api: RestClient, arguments: Any) -> None:
    resp = _post(api, json={"tool": "add", "arguments": arguments})
    err = assert_error(resp, 422, "invalid_arguments")
    assert err["details"]["tool"] == "add"


def test_deeply_nested_arguments_are_refused_cleanly(tmp_path: Path) -> None:
    with api_for(tmp_path, ApiSettings(max_body_bytes=1_000_000)) as big:
        nested = "[" * 20_000 + "1" + "]" * 20_000
        raw = '{"tool": "add", "arguments": {"a": ' + nested + ', "b": 1}}'
        resp = big.client.post("/tools/execute", content=raw.encode(),
                               headers={**big.auth("bot"), "Content-Type": "application/json"})
        assert 400 <= resp.status_code < 500, resp.text
        assert resp.json()["error"]["reason"] in {"invalid_arguments", "json_too_deep",
                                                  "payload_too_large"}


@pytest.mark.parametrize("path", ["/tools/execute", "/profiles"])
def test_the_json_nesting_limit_is_one_stated_number(tmp_path: Path, path: str) -> None:
    def body(depth: int) -> bytes:  # depth levels in all: the body object + nested arrays
        nested = "[" * (depth - 2) + "1" + "]" * (depth - 2)
        return ('{"tool": "add", "name": "p", "arguments": {"a": ' + nested + "}}").encode()

    with api_for(tmp_path, ApiSettings(max_body_bytes=1_000_000)) as big:
        headers = {**big.auth("admin" if path == "/profiles" else "bot"),
                   "Content-Type": "application/json"}
        at = big.client.post(path, content=body(MAX_JSON_DEPTH), headers=headers)
        assert at.status_code == 422, at.text  # parsed, then refused on its merits
        for depth in (MAX_JSON_DEPTH + 1, 1_000):
            over = big.client.post(path, content=body(depth), headers=headers)
            err = assert_error(over, 400, "json_too_deep")
            assert f"{MAX_JSON_DEPTH} levels" in err["message"]


def test_wide_arguments_under_the_cap_are_refused_cleanly(api: RestClient) -> None:
    wide = {f"k{i}": i for i in range(300)}
    resp = _post(api, json={"tool": "add", "arguments": {"a": 1, "b": 1, **wide}})
    assert_error(resp, 422, "invalid_arguments")


def test_oversize_header_key_is_422(api: RestClient) -> None:
    resp = _post(api, json={"tool": "add", "arguments": {"a": 1, "b": 1}},
                 headers={"Idempotency-Key": "k" * 300})
    assert_error(resp, 422, "invalid_arguments")


@pytest.mark.parametrize("path", ["/nope", "/tools/execute/extra", "/calls/x/y/z"])
def test_unknown_routes_are_404_in_the_error_shape(api: RestClient, path: str) -> None:
    assert_error(api.client.get(path, headers=api.auth("bot")), 404, "not_found")


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/tools/execute"), ("PUT", "/tools/execute"), ("GET", "/tools/execute-batch"),
    ("GET", "/calls/x/resolve"), ("GET", "/approvals/x/approve"), ("POST", "/calls/x"),
    ("DELETE", "/approvals/x"), ("POST", "/audit"),
    ("POST", "/healthz"), ("GET", "/turns/t/supersede"),
])
def test_wrong_methods_are_405_in_the_error_shape(api: RestClient, method: str, path: str) -> None:
    resp = api.client.request(method, path, headers=api.auth("admin"))
    assert_error(resp, 405, "method_not_allowed")


@pytest.mark.parametrize(("path", "params"), [
    ("/audit", {"limit": 0}), ("/audit", {"limit": "ten"}), ("/audit", {"cursor": -1}),
    ("/audit", {"since": "yesterday"}), ("/calls", {"limit": 10_000}),
    ("/approvals", {"limit": -5}),
])
def test_bad_query_parameters_are_422(api: RestClient, path: str, params: dict[str, Any]) -> None:
    resp = api.client.get(path, params=params, headers=api.auth("admin"))
    assert_error(resp, 422, "invalid_arguments")


def _raw(api: RestClient, raw: str) -> Any:
    return api.client.post("/tools/execute", content=raw.encode("ascii"),
                           headers={**api.auth("bot"), "Content-Type": "application/json"})


@pytest.mark.parametrize(("raw", "pointer"), [
    ('{"tool": "add", "arguments": {"a": 1, "b": 2, "x": "\\ud800"}}', "/x"),
    ('{"tool": "add", "arguments": {"a": 1, "b": 2, "x": ["ok", "a\\udfffb"]}}', "/x/1"),
    ('{"tool": "add", "arguments": {"a": 1, "b": 2, "\\ud800": 1}}', "/\\ud800"),
])
def test_lone_surrogates_in_arguments_are_422_with_their_pointer(api: RestClient, raw: str,
                                                                 pointer: str) -> None:
    err = assert_error(_raw(api, raw), 422, "invalid_arguments")
    assert [e["pointer"] for e in err["details"]["details"]["errors"]] == [pointer]


@pytest.mark.parametrize("field", ["tool", "turn_group_id", "idempotency_key", "trace_id"])
def test_lone_surrogates_in_call_fields_are_422_and_the_server_keeps_serving(
        api: RestClient, field: str) -> None:
    body = {"tool": "add", "arguments": {"a": 1, "b": 2}, field: "x\\ud83d"}
    raw = json.dumps(body).replace("\\\\ud83d", "\\ud83d")
    err = assert_error(_raw(api, raw), 422, "invalid_arguments")
    assert err["details"]["errors"][0]["pointer"] == f"/{field}"
    ok = _post(api, json={"tool": "add", "arguments": {"a": 1, "b": 2}})
    assert ok.status_code == 200 and ok.json()["output"] == 3


@pytest.mark.parametrize(("path", "raw", "pointer"), [
    ("/profiles", '{"name": "p\\ud800"}', "/name"),
    ("/profiles", '{"name": "p", "activations": [{"tool": "add", "policy": {"x": "\\udc00"}}]}',
     "/activations/0/policy/x"),
    ("/agents", '{"name": "a", "profile": "p\\udbff"}', "/profile"),
])
def test_lone_surrogates_in_management_bodies_are_422_not_500(api: RestClient, path: str, raw: str,
                                                              pointer: str) -> None:
    resp = api.client.post(path, content=raw.encode("ascii"),
                           headers={**api.auth("admin"), "Content-Type": "application/json"})
    err = assert_error(resp, 422, "invalid_arguments")
    assert [e["pointer"] for e in err["details"]["errors"]] == [pointer]


def test_surrogate_pairs_are_valid_unicode(api: RestClient) -> None:
    raw = '{"tool": "add", "arguments": {"a": 1, "b": 2}, "turn_group_id": "\\ud83d\\ude00"}'
    resp = _raw(api, raw)
    assert resp.status_code == 200 and resp.json()["output"] == 3
