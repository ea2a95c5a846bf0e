"""The ``retrieval:`` section of ``toolkeeper.yaml``: pipelines and documents applied
idempotently (before the tools that name them), limits as settings, bad files refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.config import apply_file
from toolkeeper.errors import ConfigError
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import CallStatus

CONFIG = """\
version: 1
retrieval:
  max_top_k: 3
  pipelines:
    - name: handbook
      chunk_chars: 300
      chunk_overlap: 30
      documents:
        - file: docs/leave.md
          metadata: {team: hr}
        - text: "Laptops are replaced every three years; ask IT for a new laptop."
          source: it/laptops
          metadata: {team: it}
tools:
  - builtin: retrieval
  - name: handbook_search
    tenant: default
    implementation_type: rag_retrieval
    implementation: {pipeline_id: handbook}
    side_effect: pure
    risk_default: low
    input_schema:
      type: object
      properties: {top_k: {type: integer}, filters: {type: object}}
      additionalProperties: false
profiles:
  - name: staff
    autonomy: 2
    activations:
      - tool: retrieval
        policy: {pipeline_id: handbook}
      - tool: handbook_search
agents:
  - {name: helper, profile: staff}
"""


def write(tmp_path: Path, text: str = CONFIG) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "leave.md").write_text(
        "Annual leave: every employee has 25 days of paid leave per year. Request leave "
        "in the HR portal at least two weeks ahead.", encoding="utf-8")
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_pipelines_are_queried_by_the_builtin_and_a_rag_tool(db_url: str,
                                                                     tmp_path: Path) -> None:
    path = write(tmp_path)
    with Gateway.open(db_url, config=path) as gw:
        assert gw.settings.retrieval_max_top_k == 3
        res = gw.call_sync("retrieval", "query", {"query": "how many days of paid leave?"},
                           agent="helper")
        assert res.status is CallStatus.SUCCEEDED, (res.reason, res.message)
        assert res.output["chunks"][0]["source"] == "docs/leave.md"
        assert res.output["chunks"][0]["metadata"] == {"team": "hr"}
        rag = gw.call_sync("handbook_search", None,
                           {"query": "new laptop", "filters": {"team": "it"}},
                           agent="helper")
        assert rag.status is CallStatus.SUCCEEDED, rag
        assert [c["source"] for c in rag.output["chunks"]] == ["it/laptops"]
        over = gw.call_sync("handbook_search", None, {"query": "leave", "top_k": 4},
                            agent="helper")
        assert over.reason == "retrieval_top_k_exceeded"
        again = apply_file(gw, path)
        assert "retrieval:default/handbook" in again.unchanged
        assert gw.retrieval.get("default", "handbook").documents == 2  # not ingested twice


def test_a_changed_document_is_ingested_on_the_next_apply(db_url: str,
                                                          tmp_path: Path) -> None:
    path = write(tmp_path)
    with Gateway.open(db_url, config=path) as gw:
        (tmp_path / "docs" / "leave.md").write_text("Leave policy v2: 30 days.",
                                                    encoding="utf-8")
        report = apply_file(gw, path)
        assert "retrieval:default/handbook" in report.updated
        assert gw.retrieval.get("default", "handbook").documents == 3


def test_a_missing_document_file_refuses_the_whole_apply(db_url: str,
                                                         tmp_path: Path) -> None:
    path = write(tmp_path, CONFIG.replace("docs/leave.md", "docs/absent.md"))
    with Gateway.open(db_url) as gw:
        with pytest.raises(ConfigError) as info:
            apply_file(gw, path)
        assert "retrieval.pipelines[0].documents[0].file" in str(info.value)
        assert gw.retrieval.pipelines("default") == []
        assert gw.catalog.all_tools() == [] or all(
            t.name != "handbook_search" for t in gw.catalog.all_tools())


@pytest.mark.parametrize(("old", "new"), [
    ("chunk_chars: 300", "chunk_chars: 5"),
    ("metadata: {team: hr}", "metadata: {team: [hr]}"),
    ("- file: docs/leave.md", "- file: docs/leave.md\n          text: both"),
    ("max_top_k: 3", "max_top_k: 0"),
])
def test_bad_retrieval_config_is_refused_with_a_position(tmp_path: Path, old: str,
                                                         new: str) -> None:
    from toolkeeper.config import load_file

    path = write(tmp_path, CONFIG.replace(old, new))
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert "retrieval" in str(info.value)
