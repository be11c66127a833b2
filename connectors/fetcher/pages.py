"""What a fetched page tells the frontier: its outlinks and its term counts.

The same reader as the recorded webs (`connectors/htmlpages.parse_page`: hrefs in document
order, text without navigation chrome) and the same tokeniser and stop words as the
relevance judge (`state/relevance.term_counts`), so a page fetched live and the same page
read from disk by the simulator carry the same terms. Links are resolved against the
page's final URL and stored the way the recorded webs store them (`normalise_url`: no
query, no fragment, the path quoted once), each once, without the page itself.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from frontierflow.connectors.htmlpages import normalise_url, parse_page
from frontierflow.state.relevance import STOP_WORDS, term_counts


@dataclass(frozen=True, slots=True)
class PageContent:
    outlinks: tuple[str, ...]
    terms: dict[str, int]


@functools.lru_cache(maxsize=65_536)
def _resolve(base: str, href: str) -> tuple[str, str, str] | None:
    """(normalised URL, netloc, host) of `href` on a page under `base`, or None when it is
    not an http(s) link. Memoised: navigation bars repeat the same relative hrefs on every
    page of a folder, and urljoin dominates the reading otherwise (as in `LinkResolver`)."""
    try:
        target = urljoin(base, href)
        parts = urlsplit(target)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return normalise_url(target), parts.netloc.lower(), parts.hostname


def _folder(page_url: str) -> str:
    """The URL of the page's folder (relative hrefs resolve against it as against the
    page), or the page URL itself when it has no path."""
    parts = urlsplit(page_url)
    cut = parts.path.rfind("/")
    if cut < 0:
        return page_url
    return f"{parts.scheme}://{parts.netloc}{parts.path[: cut + 1]}"


def link_targets(
    page_url: str, hrefs: Iterable[str], follow_hosts: frozenset[str] | None = None
) -> tuple[str, ...]:
    """Absolute http(s) URLs of `hrefs` on `page_url`, normalised, distinct, in document
    order, without the page itself; with `follow_hosts`, only those on these hosts (a host
    or host:port as it appears in the URL)."""
    own = normalise_url(page_url)
    folder = _folder(page_url)
    seen = {own}
    out: list[str] = []
    for href in hrefs:
        href = href.strip().split("#", 1)[0]
        if not href:
            continue  # the page itself
        # a relative href resolves the same from every page of a folder, except "?query"
        hit = _resolve(page_url if href.startswith("?") else folder, href)
        if hit is None:
            continue
        url, netloc, host = hit
        if follow_hosts is not None and netloc not in follow_hosts and host not in follow_hosts:
            continue
        if url not in seen:
            seen.add(url)
            out.append(url)
    return tuple(out)


def read_page(
    page_url: str, body: bytes, follow_hosts: frozenset[str] | None = None
) -> PageContent:
    """Outlinks and term counts of an HTML page served at `page_url`."""
    hrefs, text = parse_page(body)
    return PageContent(link_targets(page_url, hrefs, follow_hosts), term_counts(text, STOP_WORDS))
