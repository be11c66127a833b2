"""Links not worth following, and the registered domain a host belongs to.

Crawler traps hand out URLs without end: calendars, session ids, paths that repeat
themselves (`/a/b/a/b/a/b/…` from a relative link on an error page). `link_problem`
refuses the shapes that are never worth a request (the decide rules of Heritrix:
too many path segments, a segment repeated over and over, an overlong URL). A trap whose
URLs look ordinary (`/day/1`, `/day/2`, …) hands them out in a chain of one pattern: each
page links to URLs that are its own once their numbers are masked (`url_pattern`: a
calendar's next days, a pager's next pages, an id that counts up). Its pattern depth
(`pattern_depth`) bounds it: a page reached from a page of another pattern (or a start
page) is at 0, one reached from a page of its own pattern one deeper, and a page at
`max_pattern_depth` keeps none of its links of its own pattern. A site's own pages are
reached through pages of other patterns (an index, a section, a manual's chapters), so
the limit leaves them alone; a crawl of Debian's manuals loses nothing to it, where a limit
on plain depth in the host cost a focused crawl an eighth of its relevant pages. Beyond
that, page limits per cycle (`state.hosts.HostPolicy`) and the strategy's values (the
fetchers spend a page budget on the best entries first).

`registered_domain` is the domain a registrar sold ("example.co.uk" for
"www.a.example.co.uk"), from the Public Suffix List bundled with `publicsuffixlist` (never
fetched at run time); hosts that have none (an IP address, `localhost`, a name under an
unlisted suffix such as `.test`) are their own domain.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from itertools import repeat
from operator import eq
from urllib.parse import urlsplit

LINK_LIMIT_NAMES = (
    "max_url_chars",
    "max_path_segments",
    "max_segment_repeats",
    "max_pattern_depth",
)
"""The fields of `LinkLimits`, each an option of the fetchers."""


@dataclass(frozen=True, slots=True)
class LinkLimits:
    """Shapes of outlinks the frontier drops (each 0 or None: no limit)."""

    max_url_chars: int = 2_048
    """Longer URLs are refused (the de-facto limit of browsers and servers)."""
    max_path_segments: int = 16
    """More path segments than this (Heritrix's TooManyPathSegments default is 20)."""
    max_segment_repeats: int = 2
    """A run of one to three path segments may follow itself at most this many times in a
    row (`/x/x/x`, `/a/b/a/b/a/b` are refused at 2: Heritrix's PathologicalPath)."""
    max_pattern_depth: int = 10
    """A page this many links of its own pattern deep keeps none of its links of that
    pattern (see the module docstring): a calendar stops about 30 days on, a pager ten
    pages on."""

    def __post_init__(self) -> None:
        for name in LINK_LIMIT_NAMES:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0: no limit)")


DEFAULT_LINK_LIMITS = LinkLimits()


def link_problem(url: str, limits: LinkLimits = DEFAULT_LINK_LIMITS) -> str | None:
    """Why `url` is not worth following, or None. `url` is an absolute http(s) URL."""
    if limits.max_url_chars and len(url) > limits.max_url_chars:
        return f"longer than {limits.max_url_chars} characters"
    if not (limits.max_path_segments or limits.max_segment_repeats):
        return None
    path = urlsplit(url).path
    segments = [s for s in path.split("/") if s]
    if limits.max_path_segments and len(segments) > limits.max_path_segments:
        return f"more than {limits.max_path_segments} path segments"
    if limits.max_segment_repeats and len(segments) > limits.max_segment_repeats:
        run = _repeated_run(segments, limits.max_segment_repeats)
        if run is not None:
            return f"path {run!r} repeated more than {limits.max_segment_repeats} times in a row"
    return None


def url_netloc(url: str) -> str:
    """The lower-case `host[:port]` of an absolute URL (the fetchers' politeness unit)."""
    return url.split("/", 3)[2].lower() if url.count("/") >= 2 else ""


_DIGITS = re.compile(r"[0-9]+")


def url_pattern(url: str) -> str:
    """`url` in lower case with every run of digits masked: `/day/17` and `/day/18` (on
    one host) share one pattern."""
    return _DIGITS.sub("#", url.lower())


def pattern_depth(url: str, via: str | None, via_depth: int) -> int:
    """The pattern depth of `url` reached from `via` (None: a start page), the parent at
    `via_depth`: one deeper when both have one pattern, else 0."""
    if via is None or url_pattern(via) != url_pattern(url):
        return 0
    return via_depth + 1


def followable_links(
    links: tuple[str, ...],
    limits: LinkLimits = DEFAULT_LINK_LIMITS,
    page: str | None = None,
    depth: int = 0,
) -> tuple[str, ...]:
    """`links` of the page at URL `page` without those `link_problem` refuses, and without
    those of the page's own pattern when it is `depth` ≥ `limits.max_pattern_depth` deep in
    it (the same tuple when none is dropped).

    On the hot path of every event: a few C-level passes over all the links screen them
    (`_may_have_problem`), and only when one might be refused is each link checked."""
    if not links:
        return links
    if page is not None and limits.max_pattern_depth and depth >= limits.max_pattern_depth:
        own = url_pattern(page)
        kept = tuple(u for u in links if url_pattern(u) != own)
        links = links if len(kept) == len(links) else kept
        if not links:
            return links
    if not _may_have_problem(links, limits):
        return links
    kept = tuple(u for u in links if link_problem(u, limits) is None)
    return links if len(kept) == len(links) else kept


def _may_have_problem(links: tuple[str, ...], limits: LinkLimits) -> bool:
    """False only when no link can be refused: none is too long, none has more slashes
    than a URL within the depth may have, and no run of 1..3 slash-separated parts of the
    links joined follows itself more than the limit allows (a repeated path run is one)."""
    if limits.max_url_chars and max(map(len, links)) > limits.max_url_chars:
        return True
    if limits.max_path_segments:
        most = max(map(str.count, links, repeat("/")))
        if most > limits.max_path_segments + 2:  # "scheme://host" holds two, one a segment
            return True
    most_repeats = limits.max_segment_repeats
    if not most_repeats:
        return False
    parts = "/\n/".join(links).split("/")  # a "\n" part between two links' parts
    for width in range(1, _LONGEST_RUN + 1):
        same = bytes(map(eq, parts, parts[width:]))  # 1 where a part equals the one `width` on
        if b"\x01" * (width * most_repeats) in same:
            return True
    return False


_LONGEST_RUN = 3


def _repeated_run(segments: list[str], most: int) -> str | None:
    """The first run of 1..3 segments that follows itself more than `most` times in a row."""
    n = len(segments)
    for width in range(1, _LONGEST_RUN + 1):
        need = width * (most + 1)
        for start in range(n - need + 1):
            run = segments[start : start + width]
            if all(
                segments[start + r * width : start + (r + 1) * width] == run
                for r in range(1, most + 1)
            ):
                return "/" + "/".join(run)
    return None


@functools.lru_cache(maxsize=1)
def _suffix_list() -> object:
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


@functools.lru_cache(maxsize=1 << 14)
def registered_domain(host: str) -> str:
    """The registered domain of `host` (lower case, no port), or the host itself."""
    name = host.lower().rsplit(":", 1)[0] if not host.startswith("[") else host.lower()
    name = name.rstrip(".")
    if not name or (name[0].isdigit() and name.replace(".", "").isdigit()):
        return name  # an IPv4 address
    found = _suffix_list().privatesuffix(name)  # type: ignore[attr-defined]
    return found if found else name
