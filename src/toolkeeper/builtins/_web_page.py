"""What ``web_fetch`` makes of a fetched body: its text encoding, and for HTML the title,
main text and links.

Encoding, as a browser decides it (WHATWG Encoding): a byte-order mark, then the
``Content-Type`` charset, then (HTML only) a ``<meta>`` charset in the first 1024 bytes, then
UTF-8 if the bytes are valid UTF-8, then detection (``charset_normalizer``), then
windows-1252. Labels browsers treat as windows-1252 (``iso-8859-1``, ``us-ascii``…) are read
as windows-1252, so ``0x80``-``0x9f`` become the characters the page's author saw.

The main text comes from trafilatura (chosen by ``python -m toolkeeper.bench --only
web_fetch``); a page it finds no article in falls back to all of its visible text. Links are
the page's own ``<a href>``s, absolute (``<base href>`` honoured), http(s) only, first
occurrence kept.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

import charset_normalizer
import lxml.etree
import lxml.html

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))
_AS_WINDOWS_1252 = frozenset({"iso-8859-1", "latin-1", "ascii", "cp819", "iso8859-1",
                              "us-ascii", "l1", "latin1", "iso-ir-100", "ibm819"})
_META_CHARSET = re.compile(
    rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_SPACES = re.compile(r"\s+")
_INVISIBLE = ("script", "style", "noscript", "template", "head")


@dataclass(frozen=True)
class Link:
    text: str
    href: str


@dataclass(frozen=True)
class Page:
    title: str | None
    text: str
    links: tuple[Link, ...]


def encoding_label(label: str | None) -> str | None:
    """The Python codec for a charset label as browsers read it, or ``None`` if unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    if label in _AS_WINDOWS_1252:
        return "cp1252"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return "cp1252" if name in ("latin-1", "ascii") else name


def decode(data: bytes, declared: str | None, *, html: bool) -> tuple[str, str]:
    """``(text, encoding)`` of a body; ``declared`` is the ``Content-Type`` charset."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(name, errors="replace"), name
    encoding = encoding_label(declared)
    if encoding is None and html:
        match = _META_CHARSET.search(data[:1024])
        encoding = encoding_label(match.group(1).decode("ascii")) if match else None
    if encoding is None:
        encoding = _detect(data)
    return data.decode(encoding, errors="replace"), encoding


def _detect(data: bytes) -> str:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(data) - exc.start > 3:  # not merely a character cut by the byte cap
            best = charset_normalizer.from_bytes(data).best()
            return encoding_label(best.encoding if best else None) or "cp1252"
    return "utf-8"


def read_html(text: str, url: str, *, max_links: int) -> Page:
    """Title, main text and links of an HTML document (``url`` resolves relative links)."""
    try:
        tree = lxml.html.document_fromstring(_XML_DECLARATION.sub("", text, count=1),
                                             base_url=url)
    except (lxml.etree.ParserError, ValueError):
        return Page(title=None, text="", links=())
    title = _title(tree)
    links = _links(tree, max_links)
    import trafilatura  # ~0.15 s of imports, paid on the first page read, not at start-up

    main = trafilatura.extract(tree, url=url, include_comments=False)
    return Page(title=title, text=main or _visible_text(tree), links=links)


def _title(tree: lxml.html.HtmlElement) -> str | None:
    for path in ("//head/title", "//title", "//h1"):
        found = tree.xpath(path)
        if found:
            title = _SPACES.sub(" ", found[0].text_content()).strip()
            if title:
                return title
    return None


def _links(tree: lxml.html.HtmlElement, limit: int) -> tuple[Link, ...]:
    if limit <= 0:
        return ()
    tree.make_links_absolute(resolve_base_href=True, handle_failures="discard")
    seen: dict[str, Link] = {}
    for anchor in tree.iter("a"):
        href = (anchor.get("href") or "").strip()
        if not href.lower().startswith(("http://", "https://")) or href in seen:
            continue
        seen[href] = Link(text=_SPACES.sub(" ", anchor.text_content()).strip(), href=href)
        if len(seen) >= limit:
            break
    return tuple(seen.values())


def _visible_text(tree: lxml.html.HtmlElement) -> str:
    for element in list(tree.iter(*_INVISIBLE)):
        element.drop_tree()
    lines = (_SPACES.sub(" ", line).strip() for line in tree.text_content().splitlines())
    return "\n".join(line for line in lines if line)
