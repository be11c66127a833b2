"""The live job at each population of `frontierflow bench --scale --live-bootstrap B`.

The same timed log as the replay (`scale_state.scale_events`, the same seed) is produced to
a broker, and `frontierflow run --exit-when-idle` (IECA, RocksDB state, its own process,
no crawl-speed controller: the replay runs none) drains it over a checkpoint of the same
built state. It is timed as `bench kafka` times the live job: by its own output, from its
first frontier record to its last. The figure to read is the live rate at the largest
population over the live rate at the smallest, beside the replay's same ratio.
"""

from __future__ import annotations

from pathlib import Path

from frontierflow.pipelines.bench.kafka import (
    children_cpu_seconds,
    fresh_settings,
    produce_events,
    timed_job,
)
from frontierflow.pipelines.bench.scale_state import ScaleLogSetup, scale_events
from frontierflow.schemas.codecs import AvroCodec

Figures = dict[str, float]


def live_run(bootstrap: str, setup: ScaleLogSetup, urls: int, state: Path, step: int) -> Figures:
    """The live job over `state` (a copy of the population's built state) on the log of
    population `urls`, produced event by event (200,000 events of 30 links are ~460 MB, never
    held whole): events, seconds (first to last frontier record, scaled to every event),
    frontier records, and the job process's CPU seconds (start-up included)."""
    settings = fresh_settings(bootstrap)
    codec = AvroCodec.for_name("FetchEvent")
    events = produce_events(settings, (codec.encode(e) for e in scale_events(setup, urls)))
    cpu_before = children_cpu_seconds()
    seconds, entries = timed_job(settings, state, step, events, ["--speed-controller", "none"])
    return {
        "events": events,
        "seconds": seconds,
        "entries": entries,
        "cpu_seconds": children_cpu_seconds() - cpu_before,
    }
