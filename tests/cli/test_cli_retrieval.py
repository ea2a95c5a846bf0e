"""``toolkeeper retrieval …``: pipelines, ingest of files, query, delete — through the CLI."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import Invoke, as_json


def test_create_ingest_query_delete(cli: Invoke, admin_token: str, tmp_path: Path) -> None:
    leave = tmp_path / "leave.md"
    leave.write_text("Every employee has 25 days of paid annual leave.", encoding="utf-8")
    laptops = tmp_path / "laptops.md"
    laptops.write_text("Laptops are replaced every three years.", encoding="utf-8")
    made = cli("retrieval", "create", "handbook", "--chunk-chars", "200", "--chunk-overlap",
               "20", "--token", admin_token, "--json")
    assert made.exit_code == 0, made.output
    pid = as_json(made)["id"]
    res = cli("retrieval", "ingest", "handbook", str(leave), str(laptops),
              "--metadata-json", '{"team": "hr"}', "--token", admin_token, "--json")
    assert res.exit_code == 0, res.output
    assert [d["source"] for d in as_json(res)["documents"]] == [str(leave), str(laptops)]
    found = as_json(cli("retrieval", "query", pid, "how many days of leave", "--json"))
    assert found["pipeline_id"] == pid
    assert found["chunks"][0]["source"] == str(leave)
    assert found["chunks"][0]["metadata"] == {"team": "hr"}
    text = cli("retrieval", "query", "handbook", "laptops")
    assert text.exit_code == 0 and "laptops.md" in text.output
    listed = as_json(cli("retrieval", "list", "--json"))
    assert [(p["name"], p["documents"]) for p in listed] == [("handbook", 2)]
    gone = cli("retrieval", "delete", "handbook", "--token", admin_token)
    assert gone.exit_code == 0, gone.output
    assert as_json(cli("retrieval", "list", "--json")) == []


def test_refusals_exit_with_their_reason(cli: Invoke, admin_token: str, tmp_path: Path) -> None:
    no_token = cli("retrieval", "create", "kb")
    assert no_token.exit_code == 1 and "unauthenticated" in no_token.stderr
    assert cli("retrieval", "create", "kb", "--token", admin_token).exit_code == 0
    empty = cli("retrieval", "query", "kb", "  ")
    assert empty.exit_code == 1 and "retrieval_query_invalid" in empty.stderr
    other = cli("--tenant", "other", "retrieval", "query", "kb", "x")
    assert other.exit_code == 1 and "not_found" in other.stderr
    missing = cli("retrieval", "ingest", "kb", str(tmp_path / "absent.md"), "--token",
                  admin_token)
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    bad = cli("retrieval", "query", "kb", "x", "--filters-json", '{"k": [1]}')
    assert bad.exit_code == 1 and "retrieval_filter_invalid" in bad.stderr
