"""Test helper (not a test file): the live job (`run_live`) in a thread, for the crawl tests
that run a real fetcher against it. `LiveJob.start` starts it; `wait_applied` waits until
its steps have applied (or counted as repeats) a number of FetchEvents; `close` stops it.
`start_seeded_lafc` starts the LAFC job the crawl tests share and seeds it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from polling import wait_for

from frontierflow.connectors.kafka import KafkaSettings
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.embedded.engine import EngineStats
from frontierflow.pipelines.embedded.live import LiveOptions, run_live
from frontierflow.pipelines.speed.settings import settings_for
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.state.relevance import Topic


@dataclass
class LiveJob:
    thread: threading.Thread
    stop: threading.Event
    applied: list[EngineStats] = field(default_factory=list)
    """The engine's statistics after each step, in order."""

    @classmethod
    def start(
        cls, settings: KafkaSettings, strategy: Strategy, state_dir: Path, options: LiveOptions
    ) -> LiveJob:
        stop = threading.Event()
        applied: list[EngineStats] = []
        thread = threading.Thread(
            target=run_live,
            args=(settings, strategy, state_dir, options, stop),
            kwargs={"on_step": applied.append},
            daemon=True,
        )
        thread.start()
        return cls(thread, stop, applied)

    def wait_applied(self, events: int) -> None:
        """Until the job has applied `events` FetchEvents, repeats and deferred answers
        included (counted since this job started)."""

        def done() -> bool:
            if not self.applied:
                return False
            last = self.applied[-1]
            return last.events + last.duplicates + last.deferred >= events

        wait_for(done, "the job to apply every FetchEvent")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def start_seeded_lafc(
    settings: KafkaSettings, state_dir: Path, seeds: list[str], crawl_id: str
) -> LiveJob:
    """LAFC on "socket tcp" (control threshold 0.3, seed 1) with the statistical-hypothesis
    speed controller on 1 s windows, started, and `seeds` sent through `frontierflow
    seed`, both with the settings' Kafka client library."""
    strategy = Lafc(Topic.parse("socket tcp"), LafcSettings(control_threshold=0.3, seed=1))
    options = LiveOptions(
        step_size=200, poll_timeout_ms=50, speed=settings_for("hypothesis", window_ms=1000)
    )
    job = LiveJob.start(settings, strategy, state_dir, options)
    seed = ["seed", "--bootstrap-servers", settings.bootstrap_servers,
            "--topic-seeds", settings.topics.seeds, "--crawl-id", crawl_id,
            "--kafka-client", settings.client_library, *seeds]  # fmt: skip
    if main(seed) != 0:
        job.close()
        raise AssertionError("frontierflow seed failed")
    return job
