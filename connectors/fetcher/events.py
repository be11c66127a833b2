"""The FetchEvents a fetcher publishes, and where: one rule for every fetcher we ship.

`fetch_event` and `outcome_event` turn a frontier entry and what its download came to into
the FetchEvent (the entry's echo, via, crawl and cycle; outlinks and terms read from the
body by `htmlpages.page_links_and_terms`, queries dropped, links of the shapes traps hand
out dropped, and a page's links of its own URL pattern when it is too deep in a chain of them:
`state.traps.followable_links`). `EventPublisher` sends it to
`fetch-events` and keeps the two records a fetcher writes beside it: the download on the
compacted `fetched` topic (for the fetcher that owns the host next) and, for an answered
reply request, the tombstone of that request's own frontier record. The reference fetcher
and the Scrapy adapter both use them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from typing import Any

from frontierflow.connectors.fetcher.outcomes import STATUS_REASONS, PageOutcome
from frontierflow.connectors.fetcher.queue import is_reply_request
from frontierflow.connectors.htmlpages import page_links, page_links_and_terms
from frontierflow.connectors.kafka import KafkaTopics, host_partition
from frontierflow.connectors.kafka_client import RecordWriter
from frontierflow.schemas.codecs import AvroCodec
from frontierflow.schemas.records import (
    ALREADY_FETCHED,
    REVISIT_ECHO,
    DeadLetter,
    FetchEvent,
    FrontierEntry,
    frontier_record_key,
)
from frontierflow.state.traps import (
    DEFAULT_LINK_LIMITS,
    LinkLimits,
    followable_links,
)


def fetch_event(entry: FrontierEntry, status: int, fetcher_id: str, **fields: Any) -> FetchEvent:
    """The answer to `entry`, fetched now (the echo copied unchanged)."""
    return FetchEvent(
        url=entry.url,
        fetched_at=int(time.time() * 1000),
        status=status,
        fetcher_id=fetcher_id,
        host=entry.host,
        via=entry.via,
        crawl_id=entry.crawl_id,
        cycle=entry.cycle,
        echo=dict(entry.echo),
        **fields,
    )


def already_fetched_event(entry: FrontierEntry, fetcher_id: str) -> FetchEvent:
    """A reply request for a page already fetched in its cycle (schemas/README.md)."""
    return fetch_event(entry, ALREADY_FETCHED, fetcher_id)


def outcome_event(
    entry: FrontierEntry,
    outcome: PageOutcome,
    fetcher_id: str,
    follow_hosts: frozenset[str] | None = None,
    crawl_delay_ms: int | None = None,
    depth: int = 0,
    limits: LinkLimits = DEFAULT_LINK_LIMITS,
) -> FetchEvent:
    """The FetchEvent of a download: a negative status with no content (and the kind of
    failure) for a transport problem, the target as the only outlink for a redirect that
    was not followed, and for a body the outlinks and terms read from it, resolved against
    the final URL; both screened by `limits` for a page at pattern depth `depth` (the
    event says `depth`). The answer's `Retry-After` and the host's robots.txt Crawl-delay
    go with it, for the frontier's host rule."""
    report = {  # what the answer says of its host, and the page's depth: on every event
        "retry_after_ms": outcome.retry_after_ms,
        "crawl_delay_ms": crawl_delay_ms,
        "failure": STATUS_REASONS.get(outcome.status) if outcome.status < 0 else None,
        "depth": depth,
    }
    return _outcome_event(entry, outcome, fetcher_id, follow_hosts, depth, limits, report)


def _outcome_event(
    entry: FrontierEntry,
    outcome: PageOutcome,
    fetcher_id: str,
    follow_hosts: frozenset[str] | None,
    depth: int,
    limits: LinkLimits,
    report: dict[str, Any],
) -> FetchEvent:
    if outcome.status < 0:
        return fetch_event(
            entry,
            outcome.status,
            fetcher_id,
            fetch_ms=outcome.fetch_ms,
            bytes=outcome.size,
            **report,
        )
    if outcome.redirect_to is not None:
        return fetch_event(
            entry,
            outcome.status,
            fetcher_id,
            # the target as a link of the page: normalised, and only within the scope
            outlinks=followable_links(
                page_links(
                    outcome.final_url,
                    [outcome.redirect_to],
                    keep_query=False,  # as for a page's links, below
                    follow_hosts=follow_hosts,
                ),
                limits,
                entry.url,
                depth,
            ),
            fetch_ms=outcome.fetch_ms,
            **report,
        )
    if outcome.body is None:
        return fetch_event(
            entry,
            outcome.status,
            fetcher_id,
            fetch_ms=outcome.fetch_ms,
            bytes=outcome.size,
            **report,
        )
    # Queries dropped: the fetcher crawls the recorded webs, whose pages are stored without
    # query (`normalise_url`), so a page fetched live reports the links the simulator reads
    # from disk for it, and "x.html?v=1" is not fetched again as a page of its own.
    page = page_links_and_terms(
        outcome.final_url, outcome.body, keep_query=False, follow_hosts=follow_hosts
    )
    return fetch_event(
        entry,
        outcome.status,
        fetcher_id,
        outlinks=followable_links(page.outlinks, limits, entry.url, depth),
        terms=page.terms,
        content_hash=hashlib.sha256(outcome.body).hexdigest(),
        bytes=outcome.size,
        fetch_ms=outcome.fetch_ms,
        **report,
    )


class EventPublisher:
    """Sends a fetcher's records through one writer of the Kafka client interface (see the
    module docstring); `flush` it to know the broker has them all."""

    def __init__(self, writer: RecordWriter, topics: KafkaTopics) -> None:
        self.writer = writer
        self.topics = topics
        self._event_codec = AvroCodec.for_name("FetchEvent")
        self._dead_codec = AvroCodec.for_name("DeadLetter")

    def publish(self, event: FetchEvent) -> None:
        """One FetchEvent on `fetch-events`, keyed by host. BrokerError is raised."""
        value = self._event_codec.encode(event.to_avro())
        self.writer.send(self.topics.fetch_events, event.host.encode(), value)

    def answered(self, entry: FrontierEntry) -> None:
        """A reply request is answered: its own record on the frontier topic (keyed by URL
        and parent) is removed, so a fetcher that rebuilds its queue does not answer it
        again. Plain entries are removed by the job, when it has read the FetchEvent."""
        if not is_reply_request(entry):
            return
        topic = self.topics.frontier
        part = host_partition(entry.url, self.writer.partitions(topic))
        self.writer.send(topic, frontier_record_key(entry).encode(), None, part)

    def record_fetch(self, event: FetchEvent) -> None:
        """The download on the `fetched` topic (no outlinks, terms or echo but a revisit's
        due time), in the partition of its host, for whichever fetcher owns the host next."""
        if event.status == ALREADY_FETCHED:
            return
        kept = {k: v for k, v in event.echo.items() if k == REVISIT_ECHO}
        slim = replace(event, outlinks=(), terms=None, text=None, echo=kept)
        topic = self.topics.fetched
        part = host_partition(event.url, self.writer.partitions(topic))
        value = self._event_codec.encode(slim.to_avro())
        self.writer.send(topic, event.url.encode(), value, part)

    def dead(self, letter: DeadLetter) -> None:
        self.writer.send(self.topics.dead_letter, None, self._dead_codec.encode(letter.to_avro()))

    def flush(self) -> None:
        """Return once the broker acknowledged every record sent; SinkError otherwise."""
        self.writer.flush()
