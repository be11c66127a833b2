"""A crawl of a web that pushes back (tests/hostile_web.py): a good site of 300 pages, a
host that answers 429 with Retry-After once it has served a burst, an endless calendar, a
slow host. The live job runs on a real broker, the reference fetcher crawls a 400-page
budget over HTTP, and halfway the job and the fetcher are both stopped and started again
on the same state and topics.

Read back from the server's own request log: no request went to the busy host inside a
pause it had announced (across the restarts too), and every page answered 429 was fetched
again later or is still in the frontier (deferred, not lost). With the default limits
the calendar takes at most 10 % of the budget and the good site is crawled to at least
95 %, whichever the strategy: breadth-first ranks the calendar's deep days last, and
IECA, whose distances rank the calendar's short chain first, is stopped by the pattern
depth (`state.traps`: a page ten links down a chain of URLs of one pattern, `/day/N`,
keeps none of its links of that pattern)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hostile_web import HostileWeb
from live_job import LiveJob

from frontierflow.connectors.fetcher.loop import Fetcher
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.kafka import KafkaSettings, ensure_topics
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.embedded.live import LiveOptions
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.relevance import Topic

pytestmark = pytest.mark.kafka

BUDGET = 400
DELAY_S = 0.05


def crawl(
    strategy: Strategy[Any], kafka_broker: Any, kafka_client: Any, tmp_path: Path, web: HostileWeb
) -> tuple[list[FetchEvent], KafkaSettings]:
    """Two halves of the budget, the job and the fetcher restarted between them."""
    settings = kafka_client.settings(kafka_broker.bootstrap)
    ensure_topics(settings)
    options = LiveOptions(step_size=200, poll_timeout_ms=50)
    state = tmp_path / f"state-{strategy.name}"
    fetcher_kafka = KafkaSettings(
        bootstrap_servers=kafka_broker.bootstrap,
        topics=settings.topics,
        group_id=f"{settings.group_id}-fetchers",
    )
    resolve = {(h, web.port): "127.0.0.1" for h in web.hosts}
    follow = frozenset(f"{h}:{web.port}" for h in web.hosts)
    for half in range(2):
        job = LiveJob.start(settings, strategy, state, options)
        try:
            if half == 0:
                seed = ["seed", "--bootstrap-servers", kafka_broker.bootstrap,
                        "--topic-seeds", settings.topics.seeds, "--crawl-id", "hostile",
                        *web.seeds()]  # fmt: skip
                assert main(seed) == 0
            fetcher = Fetcher(
                FetcherSettings(
                    fetcher_id="f1",
                    delay_s=DELAY_S,
                    allow_private=True,
                    resolve=resolve,
                    follow_hosts=follow,
                    workers=4,
                    max_pages=BUDGET // 2,
                    idle_exit_s=8,
                ),
                fetcher_kafka,
            )
            stats = fetcher.run()
            job.wait_applied(stats.events)
        finally:
            job.close()
    events = [
        decode_record(FetchEvent, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.fetch_events)
    ]
    return events, settings


def latest(kafka_client: Any, settings: KafkaSettings, topic: str) -> dict[bytes, Any]:
    """Key → its latest value on `topic` (what compaction keeps)."""
    return dict(kafka_client.read_topic(settings, topic))


def _strategy(name: str) -> Strategy[Any]:
    """bfs and ieca as `frontierflow run` builds them; LAFC on "section article page" (the
    titles of the good site's pages and of the busy and slow hosts' trees, not the
    calendar's days), its control threshold at 0.3."""
    if name == "lafc":
        return Lafc(
            Topic.parse("section article page"), LafcSettings(control_threshold=0.3, seed=1)
        )
    return build_strategy(name, budget=BUDGET, crawl_id="hostile")


@pytest.mark.parametrize("strategy", ["bfs", "ieca", "lafc"])
def test_hostile_web(strategy: str, kafka_broker: Any, kafka_client: Any, tmp_path: Path) -> None:
    with HostileWeb(
        busy_burst=5, busy_window_s=2.0, busy_retry_after_s=1, slow_delay_s=1.0, slow_pages=10
    ) as web:
        events, settings = crawl(_strategy(strategy), kafka_broker, kafka_client, tmp_path, web)
        log = web.requests()
        inside = web.requests_inside_pauses("busy.test")
        pauses = web.announced_pauses("busy.test")
        good = web.pages_served("good.test")
        trap = sum(1 for r in log if r.host == "calendar.test" and r.path != "/robots.txt")
    downloads = [e for e in events if e.status != 208]
    pushed = [e for e in events if e.status == 429]
    hosts = Counter(e.host.split(":")[0] for e in downloads if not e.will_retry)
    report = (
        f"{strategy}: {len(downloads)} downloads, good {good}/300, calendar {trap}, "
        f"busy pauses {len(pauses)}, requests inside them {len(inside)}, 429s {len(pushed)}, "
        f"pages by host {dict(hosts)}, statuses {dict(Counter(e.status for e in downloads))}"
    )
    print(report)
    assert pauses, report  # the busy host did push back
    assert inside == [], report
    assert all(e.will_retry for e in pushed[:-1]) or not pushed, report
    # every page answered 429 and to be tried again was fetched later, is still to fetch,
    # or spent its tries (its last answer, a 429 not to be tried again, stands)
    later = {e.url for e in events if e.status == 200 or (e.status == 429 and not e.will_retry)}
    waiting = {
        key.decode()
        for key, value in latest(kafka_client, settings, settings.topics.frontier).items()
        if value is not None
    }
    assert {e.url for e in pushed if e.will_retry} <= later | waiting, report
    assert trap <= BUDGET // 10, report
    assert good >= 285, report
