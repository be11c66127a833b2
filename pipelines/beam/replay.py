"""The replay pipeline on Apache Beam: the step core's rules, scaled out.

Composite transforms with labelled steps:

- `ReadFetchEventLog` (`beam.io`): a log file read through Beam's `FileSystems`, each
  record decoded and checked once: typed `(position, FetchEvent)`s and `DeadLetter`s;
- `CountCrawledPages`: IECA's global clock, exact: every event's count of distinct pages
  fetched so far, over (position, crawl, url, cycle) in one ordered pass with the step
  core's `is_repeat_fetch` and `crawl_clock`. A repeat is dropped, or, for a strategy that
  `learns_from_repeats` (LAFC), let through marked as a repeat;
- `RouteFetchEvents`: each counted event, joined with its clock by position
  (`EventOrClock`), becomes the step core's `keyed_messages`, tagged with (position,
  index) so every key applies them in input order;
- `UpdateFrontier`: per URL, the messages sorted by (position, index) go through the step
  core's `apply_messages` onto the state held in a Beam state cell; out comes a
  `UrlUpdate`: the final state and the latest change per change key (a key owns every
  change key it emits, so per key is the whole story).

Records cross stages through the coders of `beam.coders` (Avro bytes; no pickling, no
JSON inside the pipeline). The result equals the embedded engine's on the same log: same
clock, same repeats, same per-key order, same functions. Global strategies (the PageRank
baselines) are refused. `CountCrawledPages` waits for the input to end; `beam.stream` is
the unbounded form.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

from frontierflow.pipelines.beam.coders import EventOrClock, UrlUpdate
from frontierflow.pipelines.beam.io import ReadFetchEventLog, write_results
from frontierflow.pipelines.core.step import (
    LatestChanges,
    apply_messages,
    crawl_clock,
    is_repeat_fetch,
    keyed_messages,
)
from frontierflow.pipelines.core.strategy import CrawlClock, GlobalStrategy, Message, Strategy
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import FetchEvent


class CountCrawledPages(beam.PTransform):
    """(position, (crawled count, repeat)) for every event that is not a repeat fetch, and,
    with `keep_repeats`, for every repeat too (count so far, repeat = True)."""

    def __init__(self, keep_repeats: bool = False) -> None:
        super().__init__()
        self.keep_repeats = keep_repeats

    def expand(self, events: Any) -> Any:
        return (
            events
            | "Quads"
            >> beam.MapTuple(
                lambda p, e: (None, (p, e.crawl_id, e.url, e.cycle))
            ).with_output_types(typehints.KV[None, typehints.Tuple[int, str, str, int]])
            | "Gather" >> beam.GroupByKey()
            | "Count" >> beam.FlatMap(count_in_order, self.keep_repeats)
        )


def count_in_order(
    keyed: tuple[None, Iterable[tuple[int, str, str, int]]], keep_repeats: bool = False
) -> Iterator[tuple[int, tuple[int, bool]]]:
    """The step core's count and repeat rule over (position, crawl, url, cycle) in input
    order. A repeat keeps the count so far: it does not count again."""
    last: dict[str, int] = {}
    counts: dict[str, int] = {}
    for position, crawl_id, url, cycle in sorted(keyed[1]):
        repeat = is_repeat_fetch(last.get(url), cycle)
        if repeat and not keep_repeats:
            continue
        clock = crawl_clock(counts.get(crawl_id, 0), repeat, 0)
        if not repeat:
            last[url] = cycle
            counts[crawl_id] = clock.crawled
        yield position, (clock.crawled, repeat)


class RouteFetchEvents(beam.PTransform):
    """(url, (position, index, (crawled, now_ms), message tuple)) for every counted event."""

    def __init__(self, strategy: Strategy[Any]) -> None:
        super().__init__()
        self.strategy = strategy

    def expand(self, pcolls: Any) -> Any:
        events, clocks = pcolls
        sides = typehints.KV[int, EventOrClock]
        tagged_events = events | "EventSide" >> beam.MapTuple(
            lambda p, e: (p, EventOrClock(event=e))
        ).with_output_types(sides)
        tagged_clocks = clocks | "ClockSide" >> beam.MapTuple(
            lambda p, c: (p, EventOrClock(clock=c))
        ).with_output_types(sides)
        return (
            (tagged_events, tagged_clocks)
            | "BothSides" >> beam.Flatten().with_output_types(sides)
            | "JoinByPosition" >> beam.GroupByKey()
            | "Route"
            >> beam.FlatMap(_route, self.strategy).with_output_types(
                typehints.KV[str, typehints.Any]
            )
        )


def _route(joined: tuple[int, Iterable[EventOrClock]], strategy: Strategy[Any]) -> Iterator[Any]:
    position, sides = joined
    event: FetchEvent | None = None
    counted: tuple[int, bool] | None = None
    for side in sides:
        if side.event is not None:
            event = side.event
        else:
            counted = side.clock
    if event is None or counted is None:  # a dropped repeat fetch has no clock
        return
    crawled, repeat = counted
    clock = (crawled, event.fetched_at)
    for index, (key, message) in enumerate(keyed_messages(strategy, event, repeat)):
        yield key, (position, index, clock, message_tuple(message))


def message_tuple(message: Message) -> tuple[Any, ...]:
    """A message as it crosses Beam stages: (type name, fields…), primitives only."""
    return (type(message).__name__, *message)


_MESSAGE_TYPES: dict[str, Any] = {cls.__name__: cls for cls in typing.get_args(Message)}


def message_of(t: tuple[Any, ...]) -> Message:
    """The message a `message_tuple` stands for (lists from a coder become tuples)."""
    fields = (tuple(f) if isinstance(f, list) else f for f in t[1:])
    return _MESSAGE_TYPES[t[0]](*fields)


class UpdateFrontier(beam.PTransform):
    """Per URL: messages in input order through the step core; state in a state cell."""

    def __init__(self, strategy: Strategy[Any]) -> None:
        super().__init__()
        self.strategy = strategy

    def expand(self, keyed: Any) -> Any:
        return (
            keyed
            | "ByUrl" >> beam.GroupByKey()
            | "ApplyInOrder"
            >> beam.ParDo(_ApplyInOrder(self.strategy))
            .with_input_types(typehints.KV[str, typehints.Iterable[typehints.Any]])
            .with_output_types(UrlUpdate)
        )


class _ApplyInOrder(beam.DoFn):
    STATE = ReadModifyWriteStateSpec("state", BytesCoder())

    def __init__(self, strategy: Strategy[Any]) -> None:
        self.strategy = strategy

    def process(
        self,
        grouped: tuple[str, Iterable[tuple[int, int, tuple[int, int], tuple[Any, ...]]]],
        state: Any = beam.DoFn.StateParam(STATE),  # noqa: B008 (Beam's idiom)
    ) -> Iterator[UrlUpdate]:
        url, messages = grouped
        ordered = sorted(messages, key=lambda m: m[:2])
        encoded, latest = apply_to_state_cell(
            self.strategy, url, state, ((*clock, message) for _, _, clock, message in ordered)
        )
        yield UrlUpdate(url, encoded, tuple(latest.values()))


def apply_to_state_cell(
    strategy: Strategy[Any],
    key: str,
    state: Any,
    messages: Iterable[tuple[int, int, tuple[Any, ...]]],
) -> tuple[bytes | None, LatestChanges]:
    """Apply (crawled, now_ms, message tuple)s in order to `key`'s state held in the Beam
    state cell `state` (read once, written once) with the step core's `apply_messages`:
    the per-URL step of both Beam forms. Returns the encoded new state and the latest
    change per change key."""
    raw = state.read()
    current = None if raw is None else strategy.decode_state(raw)
    latest: LatestChanges = {}
    current = apply_messages(
        strategy,
        key,
        current,
        ((CrawlClock(crawled, now_ms), message_of(m)) for crawled, now_ms, m in messages),
        latest,
    )
    encoded = None if current is None else strategy.encode_state(current)
    if encoded is not None:
        state.write(encoded)
    return encoded, latest


def update_frontier(events: Any, strategy: Strategy[Any]) -> Any:
    """The steps every bounded source shares: checked `(position, FetchEvent)`s in, one
    `UrlUpdate` per URL out."""
    clocks = events | "Clock" >> CountCrawledPages(strategy.learns_from_repeats)
    keyed = (events, clocks) | "Route" >> RouteFetchEvents(strategy)
    return keyed | "Update" >> UpdateFrontier(strategy)


def build_replay(
    pipeline: beam.Pipeline,
    log: Path | str,
    strategy: Strategy[Any],
    out_prefix: str,
) -> None:
    """Read `log`, update the frontier, write `<out>-frontier*.jsonl`, `<out>-state*.jsonl`
    and `<out>-dead-letters*.jsonl`."""
    events, dead = pipeline | "Read" >> ReadFetchEventLog(log)
    write_results(update_frontier(events, strategy), dead, out_prefix)


def run_beam_replay(
    log: Path | str,
    *,
    strategy_name: str,
    out_prefix: str,
    budget: int,
    seed: int = 0,
    beam_args: list[str] | None = None,
    strategy: Strategy[Any] | None = None,
) -> None:
    """Run the replay pipeline with the given Beam pipeline options and wait for it.

    `strategy`, when given, is used as it is (LAFC with its topic, say); otherwise it is
    built from `strategy_name`, `budget` and `seed`."""
    strategy = beam_strategy(strategy_name, budget=budget, seed=seed, strategy=strategy)
    options = PipelineOptions(beam_args or [])
    with beam.Pipeline(options=options) as pipeline:
        build_replay(pipeline, log, strategy, out_prefix)


def beam_strategy(
    strategy_name: str, *, budget: int, seed: int = 0, strategy: Strategy[Any] | None = None
) -> Strategy[Any]:
    """The strategy (by name unless given), refused at start-up when Beam cannot run it
    exactly: a global recomputation over every key's state has no per-key form."""
    if strategy is None:
        if strategy_name in ("pagerank", "partial-pagerank"):
            raise ValueError(
                f"{strategy_name} needs a global recomputation: use the embedded engine"
            )
        strategy = build_strategy(strategy_name, budget=budget, seed=seed)
    if isinstance(strategy, GlobalStrategy):
        raise ValueError(f"{strategy.name} needs a global recomputation: use the embedded engine")
    return strategy
