"""Test helper (not a test file): the live job (`run_live`) in a thread, for the crawl tests
that run a real fetcher against it. `LiveJob.start` starts it; `wait_applied` waits until
its steps have applied (or counted as repeats) a number of FetchEvents; `close` stops it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from polling import wait_for

from frontierflow.connectors.kafka import KafkaSettings
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.embedded.engine import EngineStats
from frontierflow.pipelines.embedded.live import LiveOptions, run_live


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
        """Until the job has applied `events` FetchEvents, repeats included."""
        wait_for(
            lambda: (
                self.applied and self.applied[-1].events + self.applied[-1].duplicates >= events
            ),
            "the job to apply every FetchEvent",
        )

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
