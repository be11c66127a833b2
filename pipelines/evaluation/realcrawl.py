"""What a real crawl did, read back from its topics and from the web server's access log:
pages per second, precision under the relevance judge, politeness, thread decisions.

The access log is the one `infra/debian-docs/serve.sh` writes (`msec request_time host
"request" status bytes`); a request started at msec − request_time. Precision is measured
twice: on the terms the fetcher reported, and, where a recorded web is given, on that web's
terms for the same page (the simulator's view), so the two crawls are judged alike.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from frontierflow.connectors.htmlpages import normalise_url
from frontierflow.pipelines.evaluation.simulator import RecordedWeb
from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent, ScalingDecision
from frontierflow.state.relevance import Judge, Topic, event_terms

LOG_SLACK_S = 0.0015
"""nginx logs times in whole milliseconds: gaps this much under the delay are rounding."""


@dataclass(frozen=True, slots=True)
class AccessLine:
    """One request in the access log."""

    start: float
    end: float
    host: str
    method: str
    path: str
    status: int
    bytes: int
    """Body bytes sent (nginx's `$body_bytes_sent`)."""


def read_access_log(path: Path) -> list[AccessLine]:
    out = []
    for line in path.read_text().splitlines():
        msec, request_time, host, rest = line.split(" ", 3)
        request, _, tail = rest[1:].partition('" ')
        parts = request.split(" ")
        method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("-", request)
        end = float(msec)
        status, sent = tail.split()[:2]
        out.append(
            AccessLine(end - float(request_time), end, host, method, target, int(status), int(sent))
        )
    return out


def requests_from_events(events: Iterable[FetchEvent]) -> list[AccessLine]:
    """The requests of a crawl as its fetcher timed them, for a crawl of a web whose
    access log is not at hand: one per download (208 answers made none), ending at its
    `fetched_at` after `fetch_ms`. robots.txt requests are not among them."""
    out = []
    for e in events:
        if e.status == ALREADY_FETCHED:
            continue
        end = e.fetched_at / 1000
        path = urlsplit(e.url).path or "/"
        out.append(AccessLine(end - e.fetch_ms / 1000, end, e.host, "GET", path, e.status, e.bytes))
    return out


@dataclass(frozen=True, slots=True)
class Politeness:
    host: str
    requests: int
    min_gap_s: float
    violations: int
    """Successive requests closer than the delay (less the log's rounding)."""
    busiest_second: int
    """Most requests that started within one calendar second."""


def politeness(
    lines: Sequence[AccessLine], delay_s: Mapping[str, float] | float
) -> list[Politeness]:
    """Per host: gaps between successive request starts against that host's delay."""
    starts: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        starts[line.host].append(line.start)
    out = []
    for host in sorted(starts):
        times = sorted(starts[host])
        delay = delay_s if isinstance(delay_s, float | int) else delay_s.get(host, 0.0)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        per_second: dict[int, int] = defaultdict(int)
        for t in times:
            per_second[int(t)] += 1
        out.append(
            Politeness(
                host,
                len(times),
                min(gaps) if gaps else float("inf"),
                sum(g < delay - LOG_SLACK_S for g in gaps),
                max(per_second.values()),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class CrawlSummary:
    downloads: int
    answered: int
    errors: int
    html_pages: int
    seconds: float
    pages_per_s: float
    relevant_by_event_terms: int
    relevant_by_web_terms: int | None
    in_web: int | None
    """Downloads that are pages of the recorded web (the rest: 404s, non-pages, ...)."""
    terms_agree: int | None
    """Pages whose reported terms equal the recorded web's."""

    @property
    def precision(self) -> float:
        return self.relevant_by_event_terms / self.downloads if self.downloads else 0.0

    @property
    def precision_web(self) -> float | None:
        if self.relevant_by_web_terms is None or not self.downloads:
            return None
        return self.relevant_by_web_terms / self.downloads


def summarise(
    events: Iterable[FetchEvent],
    topic: Topic | None,
    judge: Judge,
    web: RecordedWeb | None = None,
    url_map: Mapping[str, str] | None = None,
) -> CrawlSummary:
    """Downloads (events other than 208 answers), pages/s between the first and the last
    download, precision = relevant downloads / downloads (Akbari Torkestani 2012, eq. 20).
    `url_map` maps a served base URL (``http://host:port/``) to the recorded web's base
    URL. Without a topic nothing is judged (no page counts as relevant)."""
    downloads = [e for e in events if e.status != ALREADY_FETCHED]
    answered = (
        sum(1 for e in events if e.status == ALREADY_FETCHED) if isinstance(events, list) else 0
    )
    times = [e.fetched_at for e in downloads]
    seconds = (max(times) - min(times)) / 1000 if len(times) > 1 else 0.0
    relevant = (
        0
        if topic is None
        else sum(judge.relevant(topic, event_terms(e.terms, e.text)) for e in downloads)
    )
    web_relevant = in_web = agree = None
    if web is not None and topic is not None:
        web_relevant = in_web = agree = 0
        for e in downloads:
            page = _web_page(web, e.url, url_map or {})
            if page is None:
                continue
            in_web += 1
            terms = web.terms[page]
            web_relevant += judge.relevant(topic, terms)
            agree += event_terms(e.terms, e.text) == terms
    return CrawlSummary(
        downloads=len(downloads),
        answered=answered,
        errors=sum(1 for e in downloads if e.status < 0),
        html_pages=sum(1 for e in downloads if e.terms is not None),
        seconds=seconds,
        pages_per_s=len(downloads) / seconds if seconds else 0.0,
        relevant_by_event_terms=relevant,
        relevant_by_web_terms=web_relevant,
        in_web=in_web,
        terms_agree=agree,
    )


def _web_page(web: RecordedWeb, url: str, url_map: Mapping[str, str]) -> int | None:
    for served, recorded in url_map.items():
        if url.startswith(served):
            url = recorded + url[len(served) :]
            break
    url = normalise_url(url)
    for candidate in (url, url + "index.html" if url.endswith("/") else None):
        if candidate is None:
            continue
        try:
            return web.index_of(candidate)
        except KeyError:
            continue
    return None


def decision_lines(decisions: Iterable[ScalingDecision], fetcher_id: str) -> list[str]:
    """The thread decisions for one fetcher over time, one Markdown table row each."""
    rows = [d for d in decisions if d.fetcher_id == fetcher_id]
    if not rows:
        return []
    t0 = rows[0].window_start
    out = ["| window (s) | pages | speed (pages/s) | E_cs sign | threads | reason |",
           "|---|---:|---:|---:|---|---|"]  # fmt: skip
    for d in rows:
        out.append(
            f"| {(d.window_start - t0) / 1000:.0f}–{(d.window_end - t0) / 1000:.0f} | {d.pages} "
            f"| {d.crawl_speed:.1f} | {d.e_cs_sign:+d} | {d.threads_before} → {d.threads_after} "
            f"| {d.reason} |"
        )
    return out
