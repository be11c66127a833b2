"""The pages of an HTML tree as a crawler sees them: which files are pages, their links, their text.

`page_files` lists a folder's pages (gzipped ones included), `parse_page` takes a page's hrefs
and its text without navigation chrome, `page_links_and_terms` what a fetcher or a log
replay reports of a page (absolute outlinks under an explicit query policy, term counts),
and `LinkResolver` turns hrefs into page indices of a web. `frontierflow.connectors.topicalweb`
builds a `TopicalWeb` from them.
"""

from __future__ import annotations

import functools
import gzip
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from frontierflow.state.relevance import STOP_WORDS, term_counts

logger = logging.getLogger(__name__)

HTML_TYPES: tuple[str, ...] = ("text/html", "application/xhtml+xml")
"""The media types read as HTML pages (by the fetcher, the WARC reader, the Scrapy adapter)."""

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
    them made one topic's relevant set six times larger. Bytes are read as UTF-8
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


@dataclass(frozen=True, slots=True)
class PageContent:
    """What a fetched page tells the frontier: its outlinks and its term counts."""

    outlinks: tuple[str, ...]
    terms: dict[str, int]


@functools.lru_cache(maxsize=65_536)
def _link(base: str, href: str, keep_query: bool) -> tuple[str, str, str] | None:
    """(URL, netloc, host) of `href` (fragment already cut) on a page under `base`, or None
    when it is not an http(s) link with a host and a valid port. The URL keeps its query
    with `keep_query`, else it is `normalise_url`'s. Memoised: navigation bars repeat the
    same relative hrefs on every page of a folder, and urljoin dominates the reading
    otherwise (as in `LinkResolver`)."""
    try:
        target = urljoin(base, href)
        parts = urlsplit(target)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:  # e.g. a malformed IPv6 host: not a link anywhere
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    url = urldefrag(target).url if keep_query else normalise_url(target)
    return url, parts.netloc.lower(), parts.hostname


def _folder(page_url: str) -> str:
    """The URL of the page's folder (relative hrefs resolve against it as against the
    page), or the page URL itself when it has no path."""
    parts = urlsplit(page_url)
    cut = parts.path.rfind("/")
    if cut < 0:
        return page_url
    return f"{parts.scheme}://{parts.netloc}{parts.path[: cut + 1]}"


def page_links(
    page_url: str,
    hrefs: Iterable[str],
    *,
    keep_query: bool,
    follow_hosts: frozenset[str] | None = None,
) -> tuple[str, ...]:
    """The absolute http(s) URLs of `hrefs` on `page_url`, in document order, fragments cut;
    with `follow_hosts`, only those on these hosts (a host or host:port as in the URL).

    The query policy is the caller's choice, made explicit:

    - `keep_query=True`: each link as the page wrote it — query kept, path as written —
      every one of them, repeats and links to the page itself ("#top") included. What a
      log of someone else's crawl says a page linked to; "x?a" and "x?b" may be different
      pages there, and the step core decides what is a repeat.
    - `keep_query=False`: each link in the form the recorded webs store their pages
      (`normalise_url`: no query, the path quoted once), each once, without the page
      itself (which "?q" becomes). What a fetcher crawling a recorded web reports, so a
      page fetched live and the same page read from disk carry the same links.
    """
    own = normalise_url(page_url)
    folder = _folder(page_url)
    seen = {own}
    out: list[str] = []
    for href in hrefs:
        href = href.strip().split("#", 1)[0]
        if not href and not keep_query:
            continue  # the page itself
        # a relative href resolves the same from every page of a folder, except "" and "?q"
        hit = _link(page_url if not href or href.startswith("?") else folder, href, keep_query)
        if hit is None:
            continue
        url, netloc, host = hit
        if follow_hosts is not None and netloc not in follow_hosts and host not in follow_hosts:
            continue
        if keep_query:
            out.append(url)
        elif url not in seen:
            seen.add(url)
            out.append(url)
    return tuple(out)


def page_links_and_terms(
    page_url: str,
    html: bytes | str,
    *,
    keep_query: bool,
    follow_hosts: frozenset[str] | None = None,
    stop_words: frozenset[str] = STOP_WORDS,
) -> PageContent:
    """What a fetcher reports of an HTML page served at `page_url`: its outlinks
    (`page_links`, with the caller's query policy) and the term counts of its text without
    navigation chrome (`parse_page`, then the relevance judge's `term_counts` with the same
    stop words a recorded web uses), so a page fetched live, replayed from a WARC and read
    from disk by the simulator carry the same terms.

    Links resolve against `page_url` (the final URL after redirects); a `<base href>` is
    not read."""
    hrefs, text = parse_page(html)
    return PageContent(
        page_links(page_url, hrefs, keep_query=keep_query, follow_hosts=follow_hosts),
        term_counts(text, stop_words),
    )


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
