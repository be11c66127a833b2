"""How `frontierflow crawl` runs its parts, and in which order it stops them.

Started in this order, each stopped in the reverse one:

1. the local Kafka broker (`local_broker`), unless a broker was named; it is a child
   process in a session of its own, so a Ctrl-C in the terminal reaches this process only;
2. the crawl's topics, the operator's page, the live job (a thread: `run_live`);
3. the seeds, sent to the job through the seeds topic;
4. one reference fetcher (a thread: `Fetcher.run`).

The crawl ends when the fetcher ends: its page budget spent, nothing left to fetch for
`--idle-exit` seconds, or a first SIGINT/SIGTERM (it finishes the requests in flight and
publishes their FetchEvents). The job then applies what the fetcher published and stops at a
committed step; the report is read from the topics; the page and the broker stop last. A
second signal skips the wait for the job. Every stop keeps the state: the job's RocksDB
checkpoint in `STATE_DIR/job`, the topics in `STATE_DIR/kafka`, so the next run on the folder
goes on with the crawl. Only SIGKILL leaves the broker running: the next run on the folder
finds it (`start.sh` waits for a running broker rather than starting another) and stops it
at its end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import gc
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from frontierflow.pipelines.cli.crawl_progress import CrawlProgress, ProgressDisplay
from frontierflow.pipelines.cli.crawl_settings import FETCHER_ID, CrawlSettings

if TYPE_CHECKING:
    from frontierflow.connectors.kafka import KafkaSettings

JOB_GROUP = "frontierflow"
APPLY_DEADLINE_S = 60.0
"""How long the job may take to apply the fetcher's last FetchEvents after it stopped."""
JOIN_DEADLINE_S = 60.0
TICK_S = 0.5


class CrawlFailed(RuntimeError):
    """The job or the fetcher ended with an error; the crawl was stopped."""


class _Part:
    """A thread running one part of the crawl, keeping the error it ended with."""

    def __init__(self, name: str, target: Callable[[], object]) -> None:
        self.error: BaseException | None = None
        self._target = target
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._target()
        except BaseException as exc:  # reported by the crawl's loop, which stops
            self.error = exc

    def join(self, timeout: float) -> bool:
        """Whether it has ended."""
        self.thread.join(timeout)
        return not self.thread.is_alive()


class _Signals:
    """SIGINT and SIGTERM while the crawl runs (`handle`): the first stops the fetcher, the
    second hurries the rest."""

    def __init__(self, stop_fetcher: threading.Event, hurry: threading.Event) -> None:
        self.stop_fetcher = stop_fetcher
        self.hurry = hurry
        self.received = 0

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.received += 1
        self.stop_fetcher.set()
        if self.received > 1:
            self.hurry.set()


@contextlib.contextmanager
def _on_signals(handler: Callable[[int, FrameType | None], Any]) -> Iterator[None]:
    """SIGINT and SIGTERM go to `handler` in the block (signals reach the main thread
    only: elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as SIGINT: a KeyboardInterrupt, so the stops on the way out still run."""
    raise KeyboardInterrupt


@contextlib.contextmanager
def _state_lock(state_dir: Path) -> Iterator[None]:
    """One crawl at a time on a state folder (the second would share its broker and
    find the job's state locked)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / "crawl.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"another frontierflow crawl is running on {state_dir}: stop it first, or "
                "give another --state-dir"
            ) from None
        yield


def run_crawl(settings: CrawlSettings) -> None:
    """Run the crawl to its end (see the module docstring); the report goes to stdout.
    `CrawlFailed` when the job or the fetcher failed, `BrokerUnavailable` when the local
    broker did not start."""
    # until the crawl takes them over, and while its parts stop: SIGTERM as Ctrl-C, so
    # the parts started so far are stopped on the way out, the broker too
    with (
        _state_lock(settings.state_dir),
        _on_signals(_interrupt),
        contextlib.ExitStack() as stack,
    ):
        display = ProgressDisplay(settings.fetcher.max_pages, settings.progress_every_s)
        stack.callback(display.close)
        bootstrap = settings.bootstrap_servers or _start_broker(settings, stack, display)
        _crawl(settings, bootstrap, stack, display)


def _start_broker(
    settings: CrawlSettings, stack: contextlib.ExitStack, display: ProgressDisplay
) -> str:
    from frontierflow.pipelines.cli.local_broker import LocalBroker

    broker = LocalBroker(settings.broker_dir)
    display.say(f"starting the local Kafka broker (data in {settings.broker_dir})")
    started = time.monotonic()
    stack.callback(_stop_broker, broker, display)  # also after a start that failed half-way
    bootstrap = broker.start()
    display.say(f"Kafka broker on {bootstrap}, ready in {time.monotonic() - started:.1f} s")
    return bootstrap


def _stop_broker(broker: Any, display: ProgressDisplay) -> None:
    """Stop the broker; a signal meanwhile cannot cut that short (and leave it running)."""

    def wait(signum: int, frame: FrameType | None) -> None:
        display.say("stopping the Kafka broker, a few seconds")

    with _on_signals(wait):
        broker.stop()


def _crawl(
    settings: CrawlSettings, bootstrap: str, stack: contextlib.ExitStack, display: ProgressDisplay
) -> None:
    from frontierflow.connectors.fetcher.loop import Fetcher
    from frontierflow.connectors.fetcher.metrics import FetcherMetrics
    from frontierflow.connectors.kafka import KafkaSettings, ensure_topics
    from frontierflow.pipelines.cli.seed import send_seeds
    from frontierflow.pipelines.embedded.engine import EngineStats
    from frontierflow.pipelines.embedded.live import LiveOptions, run_live

    kafka = KafkaSettings(
        bootstrap,
        settings.topics,
        settings.kafka_client,
        group_id=JOB_GROUP,
        client_library=settings.client_library,
    )
    ensure_topics(kafka)
    observer = _start_page(settings, stack, display)
    applied: list[EngineStats] = [EngineStats()]
    stop_job = threading.Event()
    options = LiveOptions(
        step_size=settings.step_size,
        poll_timeout_ms=100,
        speed=settings.speed,
        revisit=settings.revisit,
    )
    job = _Part(
        "crawl-job",
        lambda: run_live(
            kafka,
            settings.strategy,
            settings.job_dir,
            options,
            stop_job,
            on_step=lambda stats: applied.append(stats),
            observer=observer,
        ),
    )
    stack.callback(_stop_part, job, stop_job)
    if settings.seeds:
        send_seeds(kafka, settings.seeds, settings.crawl_id, 0)
    stop_fetcher, hurry = threading.Event(), threading.Event()
    metrics = FetcherMetrics()
    fetcher = Fetcher(
        settings.fetcher,
        # a group of its own each run: the member of a run killed with SIGKILL would hold
        # the frontier's partitions until the broker gives up on it
        dataclasses.replace(kafka, group_id=f"{JOB_GROUP}-crawl-fetcher-{uuid.uuid4().hex[:12]}"),
        metrics=metrics,
        stop=stop_fetcher,
    )
    started = time.monotonic()
    signals = _Signals(stop_fetcher, hurry)
    with _on_signals(signals.handle):
        fetching = _Part("crawl-fetcher", fetcher.run)
        stack.callback(_stop_part, fetching, stop_fetcher)
        while not fetching.join(TICK_S):
            display.show(_reading(fetcher, metrics))
            if job.error is not None or not job.thread.is_alive():
                stop_fetcher.set()  # no frontier without the job: stop, then say why
        display.show(_reading(fetcher, metrics))
        seconds = time.monotonic() - started
        if signals.received:
            display.say("stopping: the job applies the last pages")
        _wait_applied(applied, fetcher.stats.events, job, hurry)
        stop_job.set()
        job.join(JOIN_DEADLINE_S)
    # the Kafka clients the job closed are freed now, not after the broker stopped (a
    # client still alive then would try to reconnect, and say so on stderr)
    gc.collect()
    display.close()
    for part, name in ((job, "the live job"), (fetching, "the fetcher")):
        if part.error is not None:
            raise CrawlFailed(f"{name} failed: {part.error}") from part.error
    pages, downloads = fetcher.stats.pages, fetcher.stats.downloads
    print(f"this run: {pages} pages in {seconds:.1f} s ({pages / seconds:.2f} a second; "
          f"{downloads} downloads with the answers asked for again)\n")  # fmt: skip
    _report(settings, kafka)


def _start_page(
    settings: CrawlSettings, stack: contextlib.ExitStack, display: ProgressDisplay
) -> Any:
    """The operator's page, when asked for: its summary is the job's observer."""
    if settings.ui_port is None:
        return None
    from frontierflow.pipelines.ui import start_page

    try:
        summary, server = start_page("crawl", settings.strategy, settings.ui_port, settings.ui_host)
    except OSError:
        if not settings.ui_port_fallback:
            raise
        summary, server = start_page("crawl", settings.strategy, 0, settings.ui_host)
    stack.callback(server.close)
    display.say(f"operator's page: {server.url}")
    return summary


def _reading(fetcher: Any, metrics: Any) -> CrawlProgress:
    def gauge(name: str) -> int:
        return int(metrics.registry.get_sample_value(name) or 0)

    return CrawlProgress(
        pages=fetcher.stats.pages,
        queued=gauge("frontierflow_fetcher_queued"),
        in_flight=gauge("frontierflow_fetcher_in_flight"),
        workers=gauge("frontierflow_fetcher_workers"),
    )


def _wait_applied(applied: list[Any], events: int, job: _Part, hurry: threading.Event) -> None:
    """Until the job has taken in the `events` FetchEvents the fetcher published this run
    (applied, repeats, deferred answers and dead letters alike), it ends, the deadline
    passes or a second signal hurries the crawl."""
    deadline = time.monotonic() + APPLY_DEADLINE_S
    while not hurry.is_set() and job.thread.is_alive() and time.monotonic() < deadline:
        last = applied[-1]
        if last.events + last.duplicates + last.deferred + last.dead_letters >= events:
            return
        hurry.wait(0.05)


def _stop_part(part: _Part, stop: threading.Event) -> None:
    stop.set()
    part.join(JOIN_DEADLINE_S)


def _report(settings: CrawlSettings, kafka: KafkaSettings) -> None:
    """The crawl report of every run so far, from the topics (`frontierflow crawl-report`'s,
    with the requests as the fetcher timed them in place of a server's access log)."""
    from frontierflow.pipelines.cli.crawl_report import print_report, read_topic
    from frontierflow.pipelines.evaluation.realcrawl import requests_from_events
    from frontierflow.schemas.codecs import decode_record
    from frontierflow.schemas.records import FetchEvent, ScalingDecision
    from frontierflow.state.relevance import Judge

    events = [
        e
        for v in read_topic(kafka, settings.topics.fetch_events)
        if (e := decode_record(FetchEvent, v)).fetcher_id == FETCHER_ID
    ]
    decisions = [
        decode_record(ScalingDecision, v)
        for v in read_topic(kafka, settings.topics.fetcher_control)
    ]
    print("the crawl so far:")
    print_report(
        events,
        decisions,
        requests_from_events(events),
        delay_s=settings.fetcher.delay_s,
        fetcher_id=FETCHER_ID,
        topic=settings.topic,
        judge=Judge(0.75, 0),
    )
    print(f"\nkept in {settings.state_dir}: run `frontierflow crawl --state-dir "
          f"{settings.state_dir}` to go on")  # fmt: skip
