"""The pages of an HTML tree as a crawler sees them: which files are pages, their links, their text.

`page_files` lists a folder's pages (gzipped ones included), `parse_page` takes a page's hrefs
and its text without navigation chrome, `page_links_and_terms` what a fetcher reports of a
page (absolute outlinks, term counts), and `LinkResolver` turns hrefs into page indices of a
web. `frontierflow.connectors.topicalweb` builds a `TopicalWeb` from them.
"""

from __future__ import annotations

import gzip
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from frontierflow.state.relevance import STOP_WORDS, term_counts

logger = logging.getLogger(__name__)

#: Navigation chrome: removed before counting terms, its links kept. Generic HTML5 landmarks
#: first, then what each Debian manual's generator wraps around the text.
CHROME_SELECTORS: tuple[str, ...] = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "header",
    "footer",
    "aside",
    "[role=navigation]",
    "[role=banner]",
    "[role=contentinfo]",
    "[role=search]",
    # Sphinx "classic"/"pydoctheme" (Python docs)
    "div.sphinxsidebar",
    "div.related",
    "div.footer",
    "div.mobile-nav",
    # Sphinx Read-the-Docs theme (kernel docs)
    ".wy-nav-side",
    ".wy-nav-top",
    ".rst-footer-buttons",
    ".rst-versions",
    # DocBook (PostgreSQL)
    "div.navheader",
    "div.navfooter",
    # javadoc 17
    ".top-nav",
    ".sub-nav",
    ".skip-nav",
    ".legal-copy",
)
_CHROME_CSS = ", ".join(CHROME_SELECTORS)
_PAGE_SUFFIXES = (".html", ".htm")
_GZ = ".gz"


def normalise_url(url: str) -> str:
    """The form a page URL is stored and looked up in: no query, no fragment, path quoted once.

    Unquoting then quoting makes "a%20b.html" and "a b.html" the same page, as a web server
    would serve them.
    """
    parts = urlsplit(url)
    path = quote(unquote(parts.path), safe="/:@!$&'()*+,;=-._~")
    return f"{parts.scheme}://{parts.netloc}{path}"


def page_files(folder: Path) -> list[tuple[str, Path]]:
    """(relative URL path, file) of every page under `folder`, sorted by that path.

    `x.html.gz` is the page `x.html` (Debian compresses large documents; links point at the
    uncompressed name); when both exist the uncompressed one wins. Symlinked files are read
    through (a dangling one is skipped); symlinked folders are not followed, which rules out
    cycles and pages reachable under two URLs.
    """
    found: dict[str, Path] = {}
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            lower = name.lower()
            compressed = lower.endswith(_GZ)
            stem = name[: -len(_GZ)] if compressed else name
            if not stem.lower().endswith(_PAGE_SUFFIXES):
                continue
            path = Path(dirpath) / name
            if not path.is_file():
                logger.debug("skipping dangling link %s", path)
                continue
            rel = Path(dirpath, stem).relative_to(folder).as_posix()
            if compressed and rel in found:
                continue
            found[rel] = path
    return sorted(found.items())


def read_page(path: Path) -> bytes:
    """The page's bytes, gunzipped when the file name ends in .gz."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.lower().endswith(_GZ) else data


def parse_page(html: bytes | str) -> tuple[list[str], str]:
    """The href of every `<a>` in document order, and the text without navigation chrome.

    Links are taken before the chrome is removed: navigation bars and sidebar TOCs are how a
    crawler moves through a manual, but their words are the same on every page, and counting
    them made one topic's relevant set six times larger (DESIGN §5). Bytes are read as UTF-8
    (what all four Debian manuals declare), undecodable bytes replaced.
    """
    text = html.decode("utf-8", errors="replace") if isinstance(html, bytes) else html
    tree = LexborHTMLParser(text)
    hrefs = [href for a in tree.css("a[href]") if (href := a.attributes.get("href"))]
    body = tree.body
    if body is None:
        return hrefs, ""
    # Reversed document order removes a nested match before its ancestor.
    for node in reversed(body.css(_CHROME_CSS)):
        node.decompose()
    return hrefs, body.text(separator=" ")


def page_links_and_terms(
    page_url: str, html: bytes | str, stop_words: frozenset[str] = STOP_WORDS
) -> tuple[list[str], dict[str, int]]:
    """What a fetcher reports of a fetched HTML page: its outlinks as absolute http(s) URLs
    in document order (fragments cut, queries kept, duplicates left for the step core), and
    the term counts of its text without navigation chrome (`parse_page`, then the relevance
    judge's `term_counts` with the same stop words a recorded web uses).

    Links resolve against `page_url`; a `<base href>` is not read."""
    hrefs, text = parse_page(html)
    outlinks: list[str] = []
    for href in hrefs:
        try:
            target = urldefrag(urljoin(page_url, href.strip())).url
            scheme = urlsplit(target).scheme
        except ValueError:  # e.g. a malformed IPv6 host: not a link anywhere
            continue
        if scheme in ("http", "https"):
            outlinks.append(target)
    return outlinks, term_counts(text, stop_words)


def _resolve(page_url: str, href: str, index: dict[str, int]) -> int:
    """The page index `href` on `page_url` leads to, or -1 when it leaves the web.

    A link to a folder ("guide/") leads to its index.html when that page exists, as a web
    server would answer.
    """
    try:
        target = urljoin(page_url, href.strip())
        parts = urlsplit(target)
    except ValueError:  # e.g. a malformed IPv6 host: not a link into the web
        return -1
    if parts.scheme not in ("http", "https"):
        return -1
    url = normalise_url(target)
    hit = index.get(url)
    if hit is None and url.endswith("/"):
        hit = index.get(url + "index.html")
    return -1 if hit is None else hit


def _distinct_targets(source: int, targets: Iterable[int]) -> list[int]:
    """Targets in first-occurrence order, without -1 (outside the web) and without `source`."""
    seen: set[int] = {-1, source}
    out: list[int] = []
    for t in targets:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


class LinkResolver:
    """`_resolve` memoised per (page folder, href).

    Sidebars and navigation bars repeat the same relative hrefs on every page of a folder, and
    urljoin dominates the parse time otherwise. A relative href resolves the same way from every
    page of one folder, except those that point at the page itself ("", "#x", "?q"), which are
    skipped.
    """

    def __init__(self, index: dict[str, int]) -> None:
        self._index = index
        self._memo: dict[tuple[str, str], int] = {}

    def targets(self, page: int, page_url: str, hrefs: Iterable[str]) -> list[int]:
        folder = page_url[: page_url.rfind("/") + 1]
        memo = self._memo
        out: list[int] = []
        for href in hrefs:
            # Fragment and query are dropped anyway; cutting them first lets "x.html#a" and
            # "x.html#b" share one memo entry.
            href = href.strip().split("#", 1)[0].split("?", 1)[0]
            if not href:
                continue  # the page itself: a self-link, never kept
            key = (folder, href)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = _resolve(page_url, href, self._index)
            out.append(hit)
        return _distinct_targets(page, out)
