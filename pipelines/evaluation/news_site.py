"""A dynamic news site rebuilt from a recorded home page, served as it was at any time.

The recording has stories with their home-page stays, sections and titles, but no article
text and no links between stories. We build the links the way news sites do (ours, not the
data's, so written down here):

- the **home page** links to every section page (navigation, largest sections first) and to
  the stories on the home page at that moment (the recorded snapshot in force);
- a **section page** links to its section's stories on the home page at that moment and to
  the `section_latest` latest stories of the section published so far;
- a **story** links to the home page, its section page, the `more_from_section` latest
  stories of its section at its publication time ("more from this section"), and the
  `related` stories of the previous `related_days` days sharing the most title terms,
  weighted toward popular ones (overlap × ln(2 + hours on the home page)).

A story is published at its first appearance on the home page; a download at time t returns
the page as it was at t (links to stories not yet published are hidden). The *rewired* site
permutes the targets of all story → story links (Palotai, Farkas & Lőrincz 2005 (long version),
§4.1: random permutations of link endpoints keep the degree distributions and destroy the
clustering).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from frontierflow.connectors.news import Stay
from frontierflow.state.docvector import DocumentVectors, Vector
from frontierflow.state.relevance import STOP_WORDS, tokenise

HOME = "https://www.bbc.com/"
SECTION_PREFIX = "https://www.bbc.com/sections/"
NO_SECTION = "Other"
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(frozen=True, slots=True)
class SiteSettings:
    """How the site's links are built (all ours: the recording has none)."""

    more_from_section: int = 5
    related: int = 3
    related_days: int = 14
    section_latest: int = 10
    history_days: int = 30
    """Stories published this long before the start exist on the site (older ones do not)."""
    dimensions: int = 50
    rewired: bool = False
    rewire_seed: int = 0


@dataclass(frozen=True, slots=True)
class Story:
    url: str
    section: str
    title: str
    published_ms: int
    popularity_hours: float


@dataclass(frozen=True, slots=True)
class Page:
    """A page as downloaded: its links, its state vector x, its publication time."""

    links: tuple[str, ...]
    x: Vector
    published_ms: int | None
    section: str | None
    terms: dict[str, int] = field(default_factory=dict)
    """The counts x is made of (what a fetcher would send as the page's terms)."""


@functools.lru_cache(maxsize=4096)
def section_url(section: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-") or "other"
    return SECTION_PREFIX + slug


def _title_terms(title: str) -> set[str]:
    return {t for t in tokenise(title) if t not in STOP_WORDS and len(t) > 2}


@dataclass
class NewsSite:
    """The site between `start_ms` and `end_ms`; `page(url, t)` downloads a page."""

    stories: dict[str, Story]
    story_links: dict[str, tuple[str, ...]]
    sections: tuple[str, ...]
    snapshot_ms: list[int]
    present: list[tuple[str, ...]]
    """Stories on the home page at each snapshot, in recorded order."""
    start_ms: int
    end_ms: int
    vectors: DocumentVectors
    section_latest: int
    _section_pub: dict[str, tuple[list[int], list[str]]] = field(default_factory=dict)
    _hub_cache: dict[tuple[str, int], Page] = field(default_factory=dict)
    _story_cache: dict[str, Page] = field(default_factory=dict)
    _links_cache: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)
    _section_urls: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        stays: Iterable[Stay],
        snapshot_ms: Sequence[int],
        start_ms: int,
        days: float,
        settings: SiteSettings | None = None,
    ) -> NewsSite:
        s = settings if settings is not None else SiteSettings()
        end_ms = start_ms + int(days * DAY_MS)
        oldest = start_ms - s.history_days * DAY_MS
        by_url: dict[str, list[Stay]] = defaultdict(list)
        for stay in stays:
            if stay.url == HOME or not stay.title:
                continue  # the recording lists the home page itself a few times
            if stay.last_ms >= oldest and stay.first_ms <= end_ms:
                by_url[stay.url].append(stay)
        stories: dict[str, Story] = {}
        for url, group in by_url.items():
            first = min(group, key=lambda st: st.first_ms)
            if first.first_ms < oldest:
                continue
            hours = sum(st.last_ms - st.first_ms for st in group) / HOUR_MS
            section = first.section or NO_SECTION
            stories[url] = Story(url, section, first.title, first.first_ms, hours)
        ordered = sorted(stories.values(), key=lambda st: (st.published_ms, st.url))
        counts = Counter(st.section for st in ordered)
        sections = tuple(sorted(counts, key=lambda sec: (-counts[sec], sec)))
        snaps = [t for t in snapshot_ms if oldest <= t <= end_ms]
        present: list[list[str]] = [[] for _ in snaps]
        for url, group in by_url.items():
            if url not in stories:
                continue
            for stay in group:
                lo = bisect.bisect_left(snaps, stay.first_ms)
                hi = bisect.bisect_right(snaps, stay.last_ms)
                for i in range(lo, hi):
                    present[i].append(url)
        links = _story_links(ordered, s)
        if s.rewired:
            links = _rewire(links, s.rewire_seed)
        corpus = [f"{st.title} {st.section}" for st in ordered]
        site = cls(
            stories,
            links,
            sections,
            snaps,
            [tuple(p) for p in present],
            start_ms,
            end_ms,
            DocumentVectors(corpus, s.dimensions),
            s.section_latest,
        )
        for st in ordered:
            times, urls = site._section_pub.setdefault(st.section, ([], []))
            times.append(st.published_ms)
            urls.append(st.url)
        return site

    def seeds(self, n: int = 10) -> tuple[str, ...]:
        """The start list of the RL foragers, "the starting URL of the web experiment and
        the first 9 visited URLs" (Palotai, Farkas & Lőrincz 2005, long version): the home
        page and its first n − 1 links at the start (the largest sections' pages)."""
        return (HOME, *self.page(HOME, self.start_ms).links[: n - 1])

    def snapshot_index(self, t: int) -> int:
        return max(0, bisect.bisect_right(self.snapshot_ms, t) - 1)

    def page(self, url: str, t: int) -> Page:
        """The page of `url` as it was at `t`."""
        story = self.stories.get(url)
        if story is not None:
            return self._story_page(story, t)
        i = self.snapshot_index(t)
        key = (url, i)
        page = self._hub_cache.get(key)
        if page is None:
            page = self._hub_page(url, i)
            self._hub_cache[key] = page
        return page

    def _story_page(self, story: Story, t: int) -> Page:
        page = self._story_cache.get(story.url)
        if page is None:
            links = (HOME, section_url(story.section), *self.story_links.get(story.url, ()))
            texts = [story.title, story.section, "home", story.section]
            texts += [self.stories[u].title for u in links[2:]]
            page = self._page(links, texts, story.published_ms, story.section)
            self._story_cache[story.url] = page
        if all(self.stories[u].published_ms <= t for u in page.links[2:]):
            return page
        visible = page.links[:2] + tuple(
            u for u in page.links[2:] if self.stories[u].published_ms <= t
        )
        return Page(visible, page.x, page.published_ms, page.section, page.terms)

    def links(self, url: str, t: int) -> tuple[str, ...]:
        """The links of `url` as it was at `t` (what `page(url, t).links` is, without
        building the page's vector)."""
        story = self.stories.get(url)
        if story is not None:
            return self._story_page(story, t).links
        i = self.snapshot_index(t)
        key = (url, i)
        page = self._hub_cache.get(key)
        if page is not None:
            return page.links
        links = self._links_cache.get(key)
        if links is None:
            links = self._links_cache[key] = self._hub_links(url, i)[0]
        return links

    def _hub_links(self, url: str, snapshot: int) -> tuple[tuple[str, ...], list[str]]:
        """A hub page's links at a snapshot, and the texts its vector is made of."""
        t = self.snapshot_ms[snapshot] if self.snapshot_ms else self.start_ms
        on_home = self.present[snapshot] if self.present else ()
        if url == HOME:
            nav = tuple(section_url(sec) for sec in self.sections)
            links = tuple(dict.fromkeys((*nav, *on_home)))
            texts = ["home", *self.sections, *(self.stories[u].title for u in on_home)]
            return links, texts
        section = self._section_of_url().get(url)
        if section is None:
            return (HOME,), ["not found"]
        times, urls = self._section_pub[section]
        n = bisect.bisect_right(times, t)
        latest = urls[max(0, n - self.section_latest) : n][::-1]
        mine = [u for u in on_home if self.stories[u].section == section]
        stories = tuple(dict.fromkeys((*mine, *latest)))
        texts = [section, "home", *(self.stories[u].title for u in stories)]
        return (HOME, *stories), texts

    def _section_of_url(self) -> dict[str, str]:
        if not self._section_urls:
            for sec in self.sections:  # the first section of a slug, as before
                self._section_urls.setdefault(section_url(sec), sec)
        return self._section_urls

    def _hub_page(self, url: str, snapshot: int) -> Page:
        links, texts = self._hub_links(url, snapshot)
        return self._page(links, texts, None, None)

    def _page(
        self, links: tuple[str, ...], texts: list[str], published: int | None, section: str | None
    ) -> Page:
        counts = self.vectors.counts(texts)
        return Page(links, self.vectors.vector_of_counts(counts), published, section, counts)


def _story_links(ordered: Sequence[Story], s: SiteSettings) -> dict[str, tuple[str, ...]]:
    """ "More from this section" and related-by-title links of every story (see module)."""
    links: dict[str, tuple[str, ...]] = {}
    by_section: dict[str, list[str]] = defaultdict(list)
    index: dict[str, list[int]] = defaultdict(list)
    terms = [_title_terms(st.title) for st in ordered]
    window = s.related_days * DAY_MS
    for i, st in enumerate(ordered):
        more = by_section[st.section][-s.more_from_section :][::-1]
        scores: Counter[int] = Counter()
        for term in terms[i]:
            for j in index[term]:
                if st.published_ms - ordered[j].published_ms <= window:
                    scores[j] += 1
        ranked = sorted(
            scores,
            key=lambda j: (-scores[j] * math.log(2.0 + ordered[j].popularity_hours), -j),
        )
        related = [ordered[j].url for j in ranked if ordered[j].url not in more]
        links[st.url] = tuple(dict.fromkeys((*more, *related[: s.related])))
        by_section[st.section].append(st.url)
        for term in terms[i]:
            index[term].append(i)
    return links


def _rewire(links: dict[str, tuple[str, ...]], seed: int) -> dict[str, tuple[str, ...]]:
    """The rewiring of Palotai, Farkas & Lőrincz 2005 (long version): the endpoints of all
    story → story links permuted at random (out- and in-degrees kept); self-links and
    repeats are dropped."""
    edges = [(src, dst) for src, dsts in links.items() for dst in dsts]
    rng = np.random.default_rng(seed)
    targets = [edges[k][1] for k in rng.permutation(len(edges))]
    out: dict[str, list[str]] = defaultdict(list)
    for (src, _), dst in zip(edges, targets, strict=True):
        if dst != src and dst not in out[src]:
            out[src].append(dst)
    return {src: tuple(out.get(src, ())) for src in links}
