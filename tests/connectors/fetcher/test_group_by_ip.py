"""Queue groups by server address (connectors/fetcher/groups.py): hosts that resolve to one
IP address are asked as one server. Unit cases for the resolution, the shared queue state
worked out by hand, then the reference fetcher on the loopback hostile web (every host on
127.0.0.1), once with each Kafka client library: with `group_by="ip"` no two requests to
the web overlap and each starts at least the delay after the previous one ended, whichever
host they went to."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest
from hostile_web import HostileWeb

from frontierflow.connectors.fetcher.groups import AddressGroups, split_netloc
from frontierflow.connectors.fetcher.loop import Fetcher
from frontierflow.connectors.fetcher.queue import HostQueues
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.kafka import ensure_topics, open_writer
from frontierflow.schemas.codecs import encode_record
from frontierflow.schemas.records import FetchEvent, FrontierEntry


def test_names_resolve_once_off_the_loop_and_unknown_ones_are_their_own_group() -> None:
    asked: list[str] = []

    def lookup(host: str) -> str | None:
        asked.append(host)
        return {"a.test": "10.0.0.1", "b.test": "10.0.0.1"}.get(host)

    groups = AddressGroups({("fixed.test", 8080): "10.0.0.9"}, lookup)
    assert groups("a.test") == "a.test"  # not resolved yet: its own group, no lookup here
    groups.warm(["a.test", "b.test:81", "a.test", "gone.test", "fixed.test:8080"])
    assert asked == ["a.test", "b.test", "gone.test"]  # once each; the fixed one not asked
    assert (groups("a.test"), groups("b.test:81")) == ("10.0.0.1", "10.0.0.1")
    assert groups("gone.test") == "gone.test"
    assert groups("fixed.test:8080") == "10.0.0.9"
    assert split_netloc("[::1]:8080") == ("::1", 8080)
    assert split_netloc("a.test") == ("a.test", None)


def _entry(url: str, priority: float) -> FrontierEntry:
    return FrontierEntry(url, url.split("/")[2], priority, "t", "c", 0, None, 0, {})


def test_hosts_of_one_group_share_one_request_at_a_time_the_delay_and_a_pause() -> None:
    group = {"a": "ip1", "b": "ip1", "c": "ip2"}.__getitem__
    q = HostQueues(delay_s=1.0, spend="time", group_of=group)
    for url, p in (("http://a/1", 3.0), ("http://b/1", 2.0), ("http://c/1", 1.0)):
        q.offer(_entry(url, p))
    first, _ = q.take(now=0.0)
    second, _ = q.take(now=0.0)
    assert first is not None and first.entry.url == "http://a/1"
    assert second is not None and second.entry.url == "http://c/1"  # b waits: a holds ip1
    q.release(first.entry, 2.0, None)
    assert q.take(now=2.5) == (None, 3.0)  # b rests with a's delay, until 3.0
    # a 429 to a pauses b as well (one host state for the group)
    q.release(second.entry, 2.0, None)
    answer = FetchEvent("http://a/1", 2_000, 429, "f", "a", crawl_id="c", retry_after_ms=60_000)
    q.observe(answer)
    assert q.take(now=3.0) == (None, 62.0)
    assert q.state_of(answer) is not None and q.state_of(answer).reason == "429"  # type: ignore[union-attr]


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_fetcher_asks_hosts_on_one_address_one_at_a_time(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, client: str
) -> None:
    delay = 0.3
    settings = dataclasses.replace(
        kafka_client.settings(kafka_broker.bootstrap), client_library=client
    )
    ensure_topics(settings)
    with HostileWeb(good_pages=30, slow_pages=4, slow_delay_s=0.1) as web:
        hosts = (web.good_host, web.busy_host, web.slow_host)
        urls = [f"{web.base(web.good_host)}/s/{k}/" for k in range(1, 5)]
        urls += [f"{web.base(web.busy_host)}/p{i}.html" for i in range(1, 4)]
        urls += [f"{web.base(web.slow_host)}/p{i}.html" for i in range(1, 3)]
        writer = open_writer(settings)
        for u in urls:
            entry = FrontierEntry(u, u.split("/")[2].split(":")[0], 1.0, "t", "c", 0, None, 0, {})
            writer.send(settings.topics.frontier, u.encode(), encode_record(entry))
        writer.flush()
        writer.close()
        fetcher = Fetcher(
            FetcherSettings(
                fetcher_id="g1",
                delay_s=delay,
                allow_private=True,
                resolve={(h, web.port): "127.0.0.1" for h in hosts},
                workers=4,
                idle_exit_s=3,
                group_by="ip",
            ),
            dataclasses.replace(settings, group_id=f"{settings.group_id}-g"),
        )
        stats = fetcher.run()
        log = sorted(web.requests(), key=lambda r: r.started)
    assert stats.downloads == len(urls)
    assert {r.host for r in log} == set(hosts)
    gaps = [b.started - a.answered for a, b in itertools.pairwise(log)]
    assert min(gaps) >= delay - 0.01, gaps  # robots.txt requests included


def test_records_and_pages_warm_their_hosts_and_scrapy_takes_the_setting() -> None:
    asked: list[str] = []
    groups = AddressGroups(
        lookup=lambda h: asked.append(h) or "10.0.0.7", fixed_hosts={"f.test": "10.0.0.8"}
    )
    records = [
        (0, 0, b"http://a.test:8080/x", b""),
        (0, 1, b"http://b.test/y\x00http://a.test/", b""),  # a reply request's key
        (0, 2, None, None),
    ]
    groups.warm_records(records)
    groups.warm_pages([FetchEvent("http://f.test/z", 0, 200, "f", "f.test")])
    assert asked == ["a.test", "b.test"]  # f.test has a fixed address
    assert (groups("a.test:8080"), groups("b.test"), groups("f.test")) == (
        "10.0.0.7",
        "10.0.0.7",
        "10.0.0.8",
    )
    from scrapy.settings import Settings

    from frontierflow.connectors.scrapy.settings import ScrapyFrontierSettings

    read = ScrapyFrontierSettings.from_scrapy(
        Settings(
            {
                "FRONTIERFLOW_BOOTSTRAP_SERVERS": "127.0.0.1:1",
                "FRONTIERFLOW_FETCHER_ID": "s1",
                "FRONTIERFLOW_GROUP_BY": "ip",
                "FRONTIERFLOW_MAX_LEAD": "1",
                "FRONTIERFLOW_MAX_PATTERN_DEPTH": "4",
                "FRONTIERFLOW_MAX_URL_CHARS": "0",
            }
        )
    )
    assert (read.group_by, read.max_lead, read.links.max_pattern_depth) == ("ip", 1, 4)
    assert (read.links.max_url_chars, read.links.max_path_segments) == (0, 16)
    with pytest.raises(ValueError, match="FRONTIERFLOW_GROUP_BY"):
        ScrapyFrontierSettings(kafka=read.kafka, fetcher_id="s", group_by="server")  # type: ignore[arg-type]
