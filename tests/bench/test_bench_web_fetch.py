"""The extractor comparison behind ``web_fetch`` (issue 10): its pages and its scoring.
Timings are never asserted."""

from __future__ import annotations

from toolkeeper.bench.model import Sizes
from toolkeeper.bench.runner import BENCHMARKS
from toolkeeper.bench.web_fetch import bench_web_fetch, candidates, make_page, score

TINY = Sizes(warmup=5, blocks=2, block_calls=10, duration_s=0.2, workers=1, budget_s=30.0)


def test_scoring_counts_article_and_chrome_sentences_apart() -> None:
    page = make_page(2)
    assert page.article and page.chrome and not page.article & page.chrome
    assert score(page, page.html) == (1.0, 1.0)  # everything kept: full recall, full noise
    assert score(page, " ".join(sorted(page.article))) == (1.0, 0.0)
    assert score(page, "") == (0.0, 0.0)


def test_bench_reports_every_candidate_and_the_chosen_one_keeps_the_article_alone() -> None:
    assert BENCHMARKS["web_fetch"] is bench_web_fetch
    result = bench_web_fetch(TINY)
    rows = {row.metric: row.value for row in result.rows}
    for name in candidates():
        assert {f"web_fetch_{name}_{k}" for k in ("ms", "recall", "noise")} <= set(rows)
    assert rows["web_fetch_trafilatura_recall"] >= 95.0
    assert rows["web_fetch_trafilatura_noise"] <= 5.0
    # a whole-page converter keeps the chrome: the pages are not trivially clean
    assert rows["web_fetch_html_text_full_noise"] >= 50.0
    assert any("trafilatura" in note for note in result.notes)
