"""The unbounded form over a log file (`replay --runner beam --clock windowed:W`): the
update path `beam.kafka.build_kafka_stream` runs on Kafka, its change records compacted
per URL before the files are written, as a compacted topic keeps them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from apache_beam import typehints

from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.io import ReadFetchEventLog, WriteResults
from frontierflow.pipelines.beam.options import pipeline_options, run_pipeline
from frontierflow.pipelines.beam.strategy import beam_strategy
from frontierflow.pipelines.beam.stream import StreamFrontier
from frontierflow.pipelines.core.step import LatestChanges, keep_latest
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.revisit_schedule import RevisitPolicy


def compact_updates(grouped: tuple[str, Iterable[UrlUpdate]]) -> UrlUpdate:
    """A URL's per-window updates → one, as a compacted topic keeps them: the state of the
    latest; of the changes, the latest per change key over the updates in
    version order (a key owns the change keys it emits, so no other URL's updates hold
    them)."""
    url, updates = grouped
    ordered = sorted(updates, key=lambda u: tuple(u.version))
    latest: LatestChanges = {}
    for update in ordered:
        keep_latest(latest, update.changes)
    return UrlUpdate(url, ordered[-1].state, tuple(latest.values()), ordered[-1].version)


def build_stream_replay(
    pipeline: beam.Pipeline,
    log: Any,
    strategy: Strategy[Any],
    out_prefix: str,
    windows: ClockWindows,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    revisit: RevisitPolicy | None = None,
) -> None:
    """The unbounded form over a log file, written as `beam.replay.build_replay` writes: the
    change records are compacted per URL at the sink (the files are bounded; the update
    path is the same one `beam.kafka.build_kafka_stream` runs unbounded)."""
    events, dead = pipeline | "Read" >> ReadFetchEventLog(log)
    parts = events | "Frontier" >> StreamFrontier(strategy, windows, hosts=hosts, revisit=revisit)
    (updates,) = parts
    results = (
        updates
        | "KeyByUrl"
        >> beam.Map(lambda u: (u.url, u)).with_output_types(typehints.KV[str, UrlUpdate])
        | "UpdatesByUrl" >> beam.GroupByKey()
        | "Compact" >> beam.Map(compact_updates).with_output_types(UrlUpdate)
    )
    (results, dead) | "Write" >> WriteResults(out_prefix)


def run_beam_stream_replay(
    log: Any,
    *,
    strategy_name: str,
    out_prefix: str,
    budget: int,
    windows: ClockWindows,
    seed: int = 0,
    beam_args: list[str] | None = None,
    strategy: Strategy[Any] | None = None,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    revisit: RevisitPolicy | None = None,
) -> None:
    """Run the unbounded form over a log with the given pipeline options and wait for it;
    `strategy`, when given, is used as it is (as in `beam.replay.run_beam_replay`)."""
    strategy = beam_strategy(strategy_name, budget=budget, seed=seed, strategy=strategy)
    run_pipeline(
        pipeline_options(beam_args),
        lambda pipeline: build_stream_replay(
            pipeline, log, strategy, out_prefix, windows, hosts, revisit
        ),
    )
