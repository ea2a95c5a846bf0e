"""Issue 10 item 1: which HTML extractor ``web_fetch`` uses, chosen by measurement.

Each candidate turns generated pages (site chrome — navigation, sidebar, share bar, related
teasers, cookie banner, footer — around one article) into text. Every sentence carries a
marker word (``art…`` in the article, ``boil…`` in the chrome), so quality is counted, not
judged: *recall* is the share of article sentences kept, *noise* the share of chrome
sentences kept. Time is the median per page. Candidates that are not installed are skipped
(the extractors besides the chosen one are dev-only).
"""

from __future__ import annotations

import importlib.util
import random
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolkeeper.bench.model import BenchResult, Row, Sizes

NAME = "web_fetch"
Extractor = Callable[[str], str]
_WORDS = (
    "the", "council", "approved", "a", "revised", "budget", "for", "water", "works", "after",
    "months", "of", "debate", "while", "residents", "asked", "how", "new", "rates", "would",
    "affect", "small", "businesses", "and", "schools", "in", "northern", "district", "where",
    "repairs", "had", "been", "delayed", "since", "storm", "last", "spring",
)
_MARKER = re.compile(r"\b(art|boil)\d{4}\b")


@dataclass(frozen=True)
class Page:
    html: str
    article: frozenset[str]
    chrome: frozenset[str]


class _Text:
    """Sentences with unique markers, so the output can be scored word-exactly."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._n = 0
        self.article: set[str] = set()
        self.chrome: set[str] = set()

    def sentence(self, kind: str, words: int = 14) -> str:
        self._n += 1
        marker = f"{kind}{self._n:04d}"
        (self.article if kind == "art" else self.chrome).add(marker)
        body = " ".join(self._rng.choice(_WORDS) for _ in range(words))
        return f"{body.capitalize()} {marker}."

    def link(self, kind: str, words: int = 3) -> str:
        return f'<a href="/p/{self._n}">{self.sentence(kind, words)}</a>'

    def paragraph(self) -> str:
        parts = [self.sentence("art", self._rng.randint(12, 26))
                 for _ in range(self._rng.randint(3, 5))]
        if self._rng.random() < 0.4:
            parts.insert(1, f'See <a href="/ref/{self._n}">{self.sentence("art", 5)}</a>')
        return "<p>" + " ".join(parts) + "</p>"


def _chrome(t: _Text, layout: int) -> tuple[str, str, str]:
    """Header/nav, sidebar and footer: semantic HTML5, labelled div soup, or unlabelled divs
    whose teasers are long sentences (the hard case)."""
    menu = "".join(f"<li>{t.link('boil', 2)}</li>" for _ in range(12))
    links = " | ".join(t.link("boil", 2) for _ in range(8))
    if layout == 2:
        long_teasers = "".join(f"<div class='c3'>{t.link('boil', 18)}</div>" for _ in range(5))
        head = f"<div class='c1'><ul>{menu}</ul></div>"
        side = f"<div class='c2'><b>{t.sentence('boil', 2)}</b>{long_teasers}</div>"
        foot = f"<div class='c4'><p>{links}</p><p>{t.sentence('boil', 20)}</p></div>"
        return head, side, foot
    teasers = "".join(f"<li>{t.link('boil', 10)}</li>" for _ in range(6))
    if layout == 0:
        logo = f"<div class='logo'>{t.sentence('boil', 3)}</div>"
        head = f"<header>{logo}<nav><ul>{menu}</ul></nav></header>"
        side = f"<aside><h3>{t.sentence('boil', 2)}</h3><ul>{teasers}</ul></aside>"
        foot = f"<footer><p>{links}</p><p>{t.sentence('boil', 9)}</p></footer>"
    else:
        head = f"<div id='header'><div class='menu'><ul>{menu}</ul></div></div>"
        side = (f"<div class='sidebar widget'><h3>{t.sentence('boil', 2)}</h3>"
                f"<ul>{teasers}</ul></div>")
        foot = (f"<div id='footer' class='footer'><p>{links}</p>"
                f"<p>{t.sentence('boil', 9)}</p></div>")
    return head, side, foot


def make_page(seed: int) -> Page:
    """One page: ``seed`` picks the layout (see ``_chrome``) and the article length."""
    t = _Text(seed)
    layout = seed % 3
    semantic = layout == 0
    head, side, foot = _chrome(t, layout)
    share = f"<div class='share'>{' '.join(t.link('boil', 1) for _ in range(4))}</div>"
    cookie = f"<div class='cookie-banner'>{t.sentence('boil', 16)}</div>"
    title = t.sentence("art", 6)
    paragraphs = "".join(t.paragraph() for _ in range(8 + seed * 7 % 23))
    article = (f"<article><h1>{title}</h1>{share}{paragraphs}</article>" if semantic else
               f"<div class='post'><h1>{title}</h1>{share}"
               f"<div class='entry'>{paragraphs}</div></div>")
    body = f"<body>{cookie}{head}<main>{article}</main>{side}{foot}</body>" if semantic else \
        f"<body>{cookie}{head}<div id='content'>{article}{side}</div>{foot}</body>"
    html = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
            f"<script>var x = 1;</script><style>p{{margin:0}}</style></head>{body}</html>")
    return Page(html, frozenset(t.article), frozenset(t.chrome))


def candidates() -> dict[str, Extractor]:
    """Every installed candidate, by name."""
    found: dict[str, Extractor] = {}
    if importlib.util.find_spec("trafilatura"):
        import trafilatura

        found["trafilatura"] = lambda html: trafilatura.extract(html) or ""
    if importlib.util.find_spec("resiliparse"):
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree

        found["resiliparse_main"] = lambda html: extract_plain_text(
            HTMLTree.parse(html), main_content=True)
    if importlib.util.find_spec("readability"):
        import lxml.html
        from readability import Document

        found["readability_lxml"] = lambda html: lxml.html.fromstring(
            Document(html).summary()).text_content()
    if importlib.util.find_spec("selectolax"):
        found["selectolax_strip"] = _selectolax
    if importlib.util.find_spec("inscriptis"):
        from inscriptis import get_text

        found["inscriptis_full"] = get_text
    if importlib.util.find_spec("html_text"):
        import html_text

        found["html_text_full"] = html_text.extract_text
    return found


def _selectolax(html: str) -> str:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    tree.strip_tags(["script", "style", "nav", "header", "footer", "aside"])
    return tree.body.text(separator="\n") if tree.body else ""


def score(page: Page, text: str) -> tuple[float, float]:
    """(recall of article sentences, share of chrome sentences kept)."""
    seen = {m.group(0) for m in _MARKER.finditer(text)}
    return len(seen & page.article) / len(page.article), len(seen & page.chrome) / len(page.chrome)


def bench_web_fetch(sizes: Sizes) -> BenchResult:
    """Median time per page, mean recall and noise of every installed candidate."""
    pages = [make_page(seed) for seed in range(max(6, sizes.blocks))]
    rounds = max(3, sizes.block_calls // 100)
    rows: list[Row] = []
    for name, extract in candidates().items():
        recall, noise, times = [], [], []
        for page in pages:
            for _ in range(rounds):
                t0 = time.perf_counter_ns()
                text = extract(page.html)
                times.append(time.perf_counter_ns() - t0)
            r, n = score(page, text)
            recall.append(r)
            noise.append(n)
        rows += [
            Row(metric=f"web_fetch_{name}_ms", value=statistics.median(times) / 1e6, unit="ms",
                decimals=2),
            Row(metric=f"web_fetch_{name}_recall", value=100 * statistics.mean(recall),
                unit="%"),
            Row(metric=f"web_fetch_{name}_noise", value=100 * statistics.mean(noise), unit="%"),
        ]
    sizes_kb = [len(p.html) / 1024 for p in pages]
    notes = [f"{len(pages)} generated pages ({min(sizes_kb):.0f}-{max(sizes_kb):.0f} KiB: "
             "semantic HTML5, labelled div soup, unlabelled divs with long teasers), "
             f"{rounds} runs each; recall = article sentences kept, noise = navigation/"
             "sidebar/footer/banner sentences kept",
             "web_fetch uses trafilatura: full recall, least noise; its few ms per page are "
             "small next to the fetch itself"]
    return BenchResult(name=NAME, title="HTML extractors for web_fetch (issue 10)", rows=rows,
                       notes=notes)
