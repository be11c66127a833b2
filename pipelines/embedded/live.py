"""`frontierflow run`: the live embedded engine between Kafka topics.

A loop polls the seeds topic (starting pages and new crawl cycles, applied and committed
with their own offsets) and a batch of FetchEvents, applies the strategy, writes frontier
changes and dead letters to Kafka, waits for the broker's acknowledgements, then commits
state and the input offsets in one RocksDB write batch (`Engine._commit`). If the broker
goes away the step is not committed; the loop closes its clients, waits, reconnects and
re-reads from the committed offsets, so nothing is lost and nothing is applied twice.
Outputs of a step that was re-done are sent again: they are upserts by URL, so the
frontier is unchanged. The Kafka client library is the caller's choice
(`KafkaSettings.client_library`, or `LiveOptions.kafka_client` over it): every read, write and
topic creation goes through the interface of `connectors.kafka_client`, and either library
leaves the same topics and state.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from frontierflow.connectors.kafka import (
    KafkaFetchEventSource,
    KafkaSeedSource,
    KafkaSettings,
    KafkaSink,
    ensure_topics,
)
from frontierflow.connectors.kafka_client import (
    KAFKA_CLIENTS,
    BrokerError,
    KafkaClientName,
    resolve_client,
)
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.embedded.engine import Engine, EngineStats
from frontierflow.pipelines.embedded.observer import StepObserver
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.revisit_schedule import RevisitPolicy
from frontierflow.state.storage.rocksdb import RocksDBStore

log = logging.getLogger(__name__)

LAG_EVERY_S = 1.0
"""How often a watched job (an observer is attached) measures its input lag."""


@dataclass(frozen=True, slots=True)
class LiveOptions:
    """How the live loop runs."""

    step_size: int = 500
    poll_timeout_ms: int = 200
    metrics_port: int | None = None
    """Serve Prometheus metrics on 127.0.0.1:PORT (0: any free port)."""
    metrics_host: str = "127.0.0.1"
    exit_when_idle: bool = False
    """Stop once every partition is read to its end (for batch-like runs and tests)."""
    retry_backoff_s: float = 1.0
    progress_every_s: float = 10.0
    speed: ControllerSettings | None = None
    """The crawl-speed controller whose ScalingDecisions go to fetcher-control;
    None: no decisions."""
    kafka_client: str | None = None
    """The Kafka client library: `kafka-python`, `confluent` (librdkafka), or `auto`,
    confluent when it is installed; None: the settings' (`KafkaSettings.client_library`)."""
    hosts: HostPolicy | None = DEFAULT_POLICY
    """The host rule's settings (`state.hosts`), the same the fetchers are given; None:
    hosts are not tracked and no entry is held."""
    revisit: RevisitPolicy | None = None
    """When pages are asked for again after a download (`state.revisit_schedule`); None:
    never."""

    def __post_init__(self) -> None:
        if self.step_size < 1 or self.poll_timeout_ms < 1:
            raise ValueError("step size and poll timeout must be >= 1")
        if self.kafka_client is not None and self.kafka_client not in KAFKA_CLIENTS:
            raise ValueError(
                f"unknown Kafka client {self.kafka_client!r}; "
                f"choose one of {', '.join(KAFKA_CLIENTS)}"
            )
        if self.retry_backoff_s <= 0:
            raise ValueError("retry backoff must be > 0")


class LiveMetrics:
    """The job's Prometheus metrics, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.events = Counter("frontierflow_events", "FetchEvents applied", registry=r)
        self.duplicates = Counter(
            "frontierflow_duplicate_events",
            "FetchEvents of pages already fetched this cycle",
            registry=r,
        )
        self.entries = Counter("frontierflow_frontier_entries", "entries written", registry=r)
        self.removals = Counter(
            "frontierflow_frontier_tombstones", "tombstones written", registry=r
        )
        self.dead = Counter(
            "frontierflow_dead_letters", "inputs sent to dead-letter", ["error_class"], registry=r
        )
        self.lag = Gauge("frontierflow_input_lag", "fetch-events records not yet read", registry=r)
        self.state_keys = Gauge(
            "frontierflow_state_keys", "estimated keys of the strategy's state", registry=r
        )
        self.step_seconds = Histogram(
            "frontierflow_step_seconds", "time per committed step", registry=r
        )
        self.reconnects = Counter(
            "frontierflow_broker_reconnects", "times the job waited for the broker", registry=r
        )
        self.decisions = Counter(
            "frontierflow_scaling_decisions", "ScalingDecisions sent to fetcher-control", registry=r
        )
        self.deferred = Counter(
            "frontierflow_deferred_answers",
            "answers a fetcher will ask again (429, 503, no answer): their host's only",
            registry=r,
        )
        self.held = Counter(
            "frontierflow_held_entries", "entries sent with not_before: host paused", registry=r
        )
        self.pauses = Counter(
            "frontierflow_host_pauses", "host pauses begun (429, 503, a failure run)", registry=r
        )
        self._last = EngineStats()
        self.port: int | None = None

    def serve(self, port: int, host: str) -> int:
        """Serve these metrics over HTTP on host:port (0: a free port); returns the port."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(server.server_port)
        return self.port

    def observe(self, stats: EngineStats) -> None:
        """Advance the counters by what the engine counted since the last call."""
        last = self._last
        self.events.inc(stats.events - last.events)
        self.duplicates.inc(stats.duplicates - last.duplicates)
        self.entries.inc(stats.entries - last.entries)
        self.removals.inc(stats.removals - last.removals)
        self.decisions.inc(stats.decisions - last.decisions)
        self.deferred.inc(stats.deferred - last.deferred)
        self.held.inc(stats.held - last.held)
        self.pauses.inc(stats.pauses - last.pauses)
        for reason, count in stats.dead_reasons.items():
            self.dead.labels(reason).inc(count - last.dead_reasons.get(reason, 0))
        self._last = EngineStats(
            events=stats.events,
            duplicates=stats.duplicates,
            entries=stats.entries,
            removals=stats.removals,
            decisions=stats.decisions,
            deferred=stats.deferred,
            held=stats.held,
            pauses=stats.pauses,
            dead_reasons=dict(stats.dead_reasons),
        )


def run_live(
    settings: KafkaSettings,
    strategy: Strategy[object],
    state_dir: Path,
    options: LiveOptions,
    stop: threading.Event | None = None,
    *,
    on_step: Callable[[EngineStats], None] | None = None,
    before_commit: Callable[[str], None] | None = None,
    metrics: LiveMetrics | None = None,
    observer: StepObserver | None = None,
) -> EngineStats:
    """Run until `stop` is set (or, with `exit_when_idle`, until the input is drained).

    `on_step` sees the counters after every committed step; `before_commit` is the
    engine's hook into its commit protocol (tests use it to die at chosen points);
    `metrics` lets the caller keep the metrics object (and its HTTP port); `observer` (an
    operator's page) is told of every committed step and, once a second, the input lag.
    """
    hooks = _Hooks(on_step or (lambda _stats: None), before_commit, observer)
    stop = stop or threading.Event()
    metrics = metrics or LiveMetrics()
    if options.metrics_port is not None:
        port = metrics.serve(options.metrics_port, options.metrics_host)
        log.info("metrics on http://%s:%d/metrics", options.metrics_host, port)
    client = resolve_client(options.kafka_client or settings.client_library)
    log.info("Kafka client: %s", client)
    families = Engine.families_for(strategy, options.speed is not None, options.revisit is not None)
    with RocksDBStore(state_dir, families) as store:
        stats = EngineStats()
        while not stop.is_set():
            try:
                stats = _run_connected(
                    settings, client, strategy, store, options, metrics, stop, stats, hooks
                )
                break
            except (BrokerError, OSError) as exc:
                metrics.reconnects.inc()
                log.warning("broker unavailable (%s); retrying from the last checkpoint", exc)
                stop.wait(options.retry_backoff_s)
        return stats


def _run_connected(
    settings: KafkaSettings,
    client: KafkaClientName,
    strategy: Strategy[object],
    store: RocksDBStore,
    options: LiveOptions,
    metrics: LiveMetrics,
    stop: threading.Event,
    previous: EngineStats,
    hooks: _Hooks,
) -> EngineStats:
    ensure_topics(settings, client)
    with contextlib.ExitStack() as clients:  # closed however the loop ends
        sink = KafkaSink(settings, client=client)
        clients.callback(sink.close)
        engine = Engine(
            strategy,
            store,
            sink,
            source_name=settings.topics.fetch_events,
            before_commit=hooks.before_commit,
            speed=options.speed,
            observer=hooks.observer,
            hosts=options.hosts,
            revisit=options.revisit,
        )
        engine.stats = previous
        source = KafkaFetchEventSource(settings, engine.input_checkpoint(), client)
        clients.callback(source.close)
        seeds = KafkaSeedSource(settings, engine.seeds_checkpoint(), client)
        clients.callback(seeds.close)
        last_report = last_lag = time.monotonic()
        while not stop.is_set():
            seed_items, seed_checkpoint = seeds.poll(options.step_size, 0)
            if seed_items:
                engine.run_seeds(seed_items, seed_checkpoint, settings.topics.seeds)
                metrics.observe(engine.stats)
                hooks.on_step(engine.stats)
                log.info("%d seeds applied", len(seed_items))
            items, checkpoint = source.poll(options.step_size, options.poll_timeout_ms)
            if items:
                started = time.perf_counter()
                engine.run_step(items, checkpoint)
                metrics.step_seconds.observe(time.perf_counter() - started)
                metrics.observe(engine.stats)
                hooks.on_step(engine.stats)
                source.commit_for_monitoring()
            now = time.monotonic()
            report = now - last_report >= options.progress_every_s
            watched = hooks.observer is not None and now - last_lag >= LAG_EVERY_S
            if report or watched or (not items and options.exit_when_idle):
                if not items and options.exit_when_idle:  # the broker's own word decides
                    lag = source.lag() + seeds.lag()
                else:  # a report or the page: what the last fetches said is enough (the
                    # broker's answer waits behind an idle topic's long-polling fetch)
                    lag = source.lag_estimate() + seeds.lag_estimate()
                metrics.lag.set(lag)
                if hooks.observer is not None:
                    hooks.observer.input_lag(lag)
                    last_lag = now
                metrics.state_keys.set(store.estimate_keys(strategy.family))
                if report:
                    _log_progress(engine.stats, lag)
                    last_report = now
                if not items and options.exit_when_idle and lag == 0:
                    break
        _log_progress(engine.stats, source.lag())
        return engine.stats


@dataclass(frozen=True, slots=True)
class _Hooks:
    on_step: Callable[[EngineStats], None]
    before_commit: Callable[[str], None] | None
    observer: StepObserver | None


def _log_progress(stats: EngineStats, lag: int) -> None:
    log.info(
        "%d events (%d duplicates, %d dead letters), %d entries, %d tombstones; lag %d",
        stats.events,
        stats.duplicates,
        stats.dead_letters,
        stats.entries,
        stats.removals,
        lag,
    )
