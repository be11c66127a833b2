"""Pure conversions between URL Frontier messages and frontierflow's records.

A URL Frontier client reports a fetched page as a `KnownURLItem` (no outlinks, no text)
and its outlinks as separate `DiscoveredURLItem`s. `checked_info` turns either's URLInfo
into a `PutItem` or the reason it is refused; `parent_of` reads the page a discovered URL
was found on from StormCrawler's `url.path` metadata; `fetch_event` assembles the page's
FetchEvent from its report, its stored record and the outlinks gathered for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from frontierflow.connectors.urlfrontier import urlfrontier_pb2 as pb
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.urlfrontier import UrlRecord, UrlStatus
from frontierflow.state.urls import canonical_url, http_host

DEFAULT_CRAWL: Final = "DEFAULT"
"""The crawl of a message whose crawlID is empty (as in the reference implementation)."""
PATH_KEY: Final = "url.path"
"""StormCrawler's metadata (with `metadata.track.path`): the URLs that led here, the
parent last."""
STATUS_KEY: Final = "fetch.statusCode"
"""StormCrawler's metadata: the HTTP status of the fetch (default 200)."""
TEXT_KEY: Final = "text"
"""Optional metadata: the page's text (values joined by newlines), for LAFC and best-first."""
TERMS_KEY: Final = "terms"
"""Optional metadata: the page's term counts, one `term=count` per value."""
FETCHER_KEY: Final = "fetcher_id"
"""Optional metadata: the fetcher that reported the page (default `urlfrontier`)."""
DEFAULT_FETCHER: Final = "urlfrontier"


@dataclass(frozen=True, slots=True)
class ItemLimits:
    """Sizes beyond which an item is refused (SKIPPED) rather than stored."""

    max_url_chars: int = 8_192
    max_key_chars: int = 1_024
    max_crawl_chars: int = 256
    max_metadata_keys: int = 256
    max_metadata_chars: int = 2_000_000
    """All keys and values of one item's metadata together."""


@dataclass(frozen=True, slots=True)
class PutItem:
    """A URLInfo that passed the checks."""

    url: str
    host: str
    crawl_id: str
    queue: str
    metadata: dict[str, list[str]]


class ItemProblem(ValueError):
    """A URLInfo that cannot be used; the message is the reason."""


def crawl_of(crawl_id: str) -> str:
    return crawl_id or DEFAULT_CRAWL


def checked_info(info: pb.URLInfo, limits: ItemLimits) -> PutItem:
    """The checked item of `info`, or `ItemProblem` naming what is wrong with it."""
    url = info.url
    host = http_host(url, limits.max_url_chars)
    if host is None:
        raise ItemProblem(
            f"not an absolute http(s) URL of at most {limits.max_url_chars} "
            f"characters: {url[:200]!r}"
        )
    if len(info.key) > limits.max_key_chars or not info.key.isprintable():
        raise ItemProblem(f"queue key longer than {limits.max_key_chars} or not printable")
    if len(info.crawlID) > limits.max_crawl_chars or not info.crawlID.isprintable():
        raise ItemProblem(f"crawl id longer than {limits.max_crawl_chars} or not printable")
    if len(info.metadata) > limits.max_metadata_keys:
        raise ItemProblem(f"{len(info.metadata)} metadata keys exceed {limits.max_metadata_keys}")
    metadata = {k: list(v.values) for k, v in info.metadata.items()}
    size = sum(len(k) + sum(len(x) for x in v) for k, v in metadata.items())
    if size > limits.max_metadata_chars:
        raise ItemProblem(f"metadata of {size} characters exceeds {limits.max_metadata_chars}")
    return PutItem(canonical_url(url), host, crawl_of(info.crawlID), info.key or host, metadata)


def parent_of(item: PutItem) -> str | None:
    """The page `item` was found on: the last `url.path` value, if it is another http(s)
    URL."""
    path = item.metadata.get(PATH_KEY)
    if not path:
        return None
    parent = path[-1]
    if http_host(parent) is None or canonical_url(parent) == item.url:
        return None
    return canonical_url(parent)


def fetch_event(
    item: PutItem, record: UrlRecord, outlinks: Sequence[str], now_ms: int
) -> FetchEvent:
    """The FetchEvent of a reported page: its cycle, via and echo from the frontier entry
    that served it (kept in `record`), its outlinks gathered from discovered URLs, status,
    text and terms from metadata."""
    meta = item.metadata
    text = "\n".join(meta[TEXT_KEY]) if meta.get(TEXT_KEY) else None
    return FetchEvent(
        url=item.url,
        fetched_at=now_ms,
        status=_status(meta.get(STATUS_KEY)),
        fetcher_id=(meta.get(FETCHER_KEY) or [DEFAULT_FETCHER])[0],
        host=item.host,
        via=record.via,
        crawl_id=item.crawl_id,
        cycle=record.cycle,
        outlinks=tuple(outlinks),
        terms=_terms(meta.get(TERMS_KEY)),
        text=text,
        echo=dict(record.echo),
    )


def _status(values: Sequence[str] | None) -> int:
    if not values:
        return 200
    try:
        return int(values[0])
    except ValueError:
        raise ItemProblem(f"{STATUS_KEY} is not an integer: {values[0][:40]!r}") from None


def _terms(values: Sequence[str] | None) -> dict[str, int] | None:
    if not values:
        return None
    terms: dict[str, int] = {}
    for value in values:
        term, sep, count = value.rpartition("=")
        if not sep or not term:
            raise ItemProblem(f"{TERMS_KEY} value is not term=count: {value[:40]!r}")
        try:
            terms[term] = terms.get(term, 0) + int(count)
        except ValueError:
            raise ItemProblem(f"{TERMS_KEY} count is not an integer: {value[:40]!r}") from None
    return terms


def url_info(url: str, crawl_id: str, record: UrlRecord) -> pb.URLInfo:
    """The URLInfo of a stored URL, as GetURLs and ListURLs send it."""
    return pb.URLInfo(
        url=url,
        key=record.queue,
        crawlID=crawl_id,
        metadata=_metadata(record.metadata),
    )


def url_item(url: str, crawl_id: str, record: UrlRecord) -> pb.URLItem:
    """A stored URL as GetURLStatus and ListURLs answer it: known once fetched (with its
    refetch date: the client's, or the frontier's `not_before` if later), discovered
    before."""
    info = url_info(url, crawl_id, record)
    if record.status is UrlStatus.QUEUED:
        return pb.URLItem(
            discovered=pb.DiscoveredURLItem(info=info), ID=url, creation_date=record.created
        )
    return pb.URLItem(
        known=pb.KnownURLItem(info=info, refetchable_from_date=record.refetchable_from()),
        ID=url,
        creation_date=record.created,
    )


def _metadata(values: Mapping[str, list[str]]) -> dict[str, pb.StringList]:
    return {k: pb.StringList(values=v) for k, v in values.items()}
