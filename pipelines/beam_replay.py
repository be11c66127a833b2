"""The replay pipeline on Apache Beam: the embedded engine's operators, scaled out.

Composite transforms with labelled steps:

- `ReadFetchEventLog`: a log file (Avro container or JSON lines) as positioned items;
- `DecodeFetchEvents`: valid FetchEvents on the main output, dead letters on `dead`;
- `CountCrawledPages`: IECA's global clock, exact: every event's count of distinct pages
  fetched so far, repeats dropped (the rule of `engine.is_repeat_fetch`), computed over
  (position, url, cycle) triples in one ordered pass;
- `RouteFetchEvents`: each counted event becomes keyed messages (Fetched, then one Link per
  outlink), tagged with (position, index) so every key can apply them in input order;
- `UpdateFrontier`: per URL, the messages sorted by (position, index) are folded through
  the strategy's own `apply` onto the state held in a Beam state spec (encoded with the
  strategy's codec); out come the latest frontier change and the final state.

The result equals the embedded engine's on the same log: same clock, same per-key order,
same function. Global strategies (the PageRank baselines) are not offered here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

from frontierflow.connectors.logs import read_fetch_events
from frontierflow.pipelines.engine import Failed, is_repeat_fetch
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.base import (
    CrawlClock,
    Fetched,
    Link,
    Message,
    Removal,
    Strategy,
)
from frontierflow.pipelines.validate import InvalidEvent, validate_event
from frontierflow.schemas.codecs import AvroCodec, record_from_dict, record_to_json
from frontierflow.schemas.records import DeadLetter, FetchEvent

DEAD = "dead"

# Elements crossing stages are plain tuples and Avro bytes, never pickled objects:
# a FetchEvent travels as its single-object encoding, a message as (kind, fields…).
_EVENT = AvroCodec.for_name("FetchEvent")


def event_bytes(event: FetchEvent) -> bytes:
    return _EVENT.encode(event.to_avro())


def _event_of(data: bytes) -> FetchEvent:
    return record_from_dict(FetchEvent, _EVENT.decode(data))


class ReadFetchEventLog(beam.PTransform):
    """(position, Avro bytes or failure tuple, raw) for every record of a log file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = str(path)

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "LogPath" >> beam.Create([self.path])
            | "ReadRecords" >> beam.FlatMap(_read_items)
            | "Spread" >> beam.Reshuffle()
        )


def _read_items(path: str) -> Iterator[tuple[int, tuple[str, bytes] | bytes, bytes]]:
    for position, item, raw in read_fetch_events(Path(path)):
        if isinstance(item, Failed):
            yield position.offset, (item.error_class, item.message.encode()), raw
        else:
            yield position.offset, event_bytes(item), raw


class DecodeFetchEvents(beam.PTransform):
    """Main output: (position, event bytes) of valid events; `dead`: DeadLetter JSON."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def expand(self, items: Any) -> Any:
        return items | "Validate" >> beam.ParDo(_Validate(self.source)).with_outputs(
            DEAD, main="events"
        )


class _Validate(beam.DoFn):
    def __init__(self, source: str) -> None:
        self.source = source

    def process(self, item: tuple[int, Any, bytes]) -> Iterator[Any]:
        position, payload, raw = item
        if isinstance(payload, tuple):
            yield self._dead(position, payload[0], payload[1].decode(), raw)
            return
        try:
            event = validate_event(_event_of(payload))
        except InvalidEvent as exc:
            yield self._dead(position, "InvalidEvent", str(exc), raw)
            return
        yield position, event_bytes(event)

    def _dead(self, position: int, error_class: str, message: str, raw: bytes) -> Any:
        letter = DeadLetter(self.source, None, position, error_class, message, raw, 0)
        return beam.pvalue.TaggedOutput(DEAD, record_to_json(letter.to_avro(), "DeadLetter"))


class CountCrawledPages(beam.PTransform):
    """(position, crawled count) for every event that is not a repeat fetch."""

    def expand(self, events: Any) -> Any:
        return (
            events
            | "Triples" >> beam.Map(_triple)
            | "AllToOne" >> beam.Map(lambda t: (None, t))
            | "Gather" >> beam.GroupByKey()
            | "Count" >> beam.FlatMap(_count_in_order)
        )


def _triple(item: tuple[int, bytes]) -> tuple[int, str, str, int]:
    event = _event_of(item[1])
    return item[0], event.crawl_id, event.url, event.cycle


def _count_in_order(
    keyed: tuple[None, Iterable[tuple[int, str, str, int]]],
) -> Iterator[tuple[int, int]]:
    last: dict[tuple[str, str], int] = {}
    counts: dict[str, int] = {}
    for position, crawl_id, url, cycle in sorted(keyed[1]):
        if is_repeat_fetch(last.get((crawl_id, url)), cycle):
            continue
        last[(crawl_id, url)] = cycle
        counts[crawl_id] = counts.get(crawl_id, 0) + 1
        yield position, counts[crawl_id]


class RouteFetchEvents(beam.PTransform):
    """(url, (position, index, clock, message tuple)) for every counted event."""

    def __init__(self, strategy: Strategy[Any]) -> None:
        super().__init__()
        self.strategy = strategy

    def expand(self, pcolls: Any) -> Any:
        events, clocks = pcolls
        return (
            {"event": events, "clock": clocks}
            | "JoinClock" >> beam.CoGroupByKey()
            | "Route" >> beam.FlatMap(_route, self.strategy)
        )


def _route(joined: tuple[int, dict[str, list[Any]]], strategy: Strategy[Any]) -> Iterator[Any]:
    position, parts = joined
    if parts["clock"] and parts["event"]:  # a repeat fetch has no clock: it is dropped
        yield from _route_event(position, _event_of(parts["event"][0]), parts["clock"][0], strategy)


def _route_event(
    position: int, event: FetchEvent, crawled: int, strategy: Strategy[Any]
) -> Iterator[Any]:
    clock = (crawled, event.fetched_at)
    routed = strategy.route(event)
    f = routed.fetched
    yield f.url, (position, -1, clock, ("F", f.url, f.crawl_id, f.cycle, f.outlinks))
    for i, link in enumerate(routed.links):
        yield link.child, (position, i, clock, ("L", *link))


def _message(t: tuple[Any, ...]) -> Message:
    if t[0] == "F":
        return Fetched(t[1], t[2], t[3], tuple(t[4]))
    return Link(*t[1:])


class UpdateFrontier(beam.PTransform):
    """Per URL: messages in input order through `strategy.apply`; state in a state spec."""

    def __init__(self, strategy: Strategy[Any]) -> None:
        super().__init__()
        self.strategy = strategy

    def expand(self, keyed: Any) -> Any:
        return (
            keyed
            | "ByUrl" >> beam.GroupByKey()
            | "ApplyInOrder"
            >> beam.ParDo(_ApplyInOrder(self.strategy)).with_input_types(tuple[str, Iterable[Any]])
        )


class _ApplyInOrder(beam.DoFn):
    STATE = ReadModifyWriteStateSpec("state", BytesCoder())

    def __init__(self, strategy: Strategy[Any]) -> None:
        self.strategy = strategy

    def process(
        self,
        grouped: tuple[str, Iterable[tuple[int, int, tuple[int, int], tuple[Any, ...]]]],
        state: Any = beam.DoFn.StateParam(STATE),  # noqa: B008 (Beam's idiom)
    ) -> Iterator[tuple[str, bytes | None, str | None]]:
        url, messages = grouped
        raw = state.read()
        current = None if raw is None else self.strategy.decode_state(raw)
        latest: Any = None
        for _, _, (crawled, now_ms), message in sorted(messages, key=lambda m: m[:2]):
            current, change = self.strategy.apply(
                url, current, _message(message), CrawlClock(crawled, now_ms)
            )
            if change is not None:
                latest = change
        encoded = None if current is None else self.strategy.encode_state(current)
        if encoded is not None:
            state.write(encoded)
        yield url, encoded, _latest_json(latest)


TOMBSTONE = ""
"""The latest change of a URL was its fetch (Kafka: a null value)."""


def _latest_json(change: Any) -> str | None:
    """A URL's latest frontier change: entry JSON, TOMBSTONE, or None for no change."""
    if change is None:
        return None
    if isinstance(change, Removal):
        return TOMBSTONE
    return record_to_json(change.to_avro(), "FrontierEntry")


def build_replay(
    pipeline: beam.Pipeline,
    log: Path,
    strategy: Strategy[Any],
    out_prefix: str,
) -> None:
    """Read `log`, update the frontier, write `<out>-frontier*.jsonl`, `<out>-state*.jsonl`
    and `<out>-dead-letters*.jsonl`."""
    items = pipeline | "Read" >> ReadFetchEventLog(log)
    results, dead = update_frontier(items, strategy, str(log))
    (
        results
        | "Entries" >> beam.FlatMap(lambda r: [r[2]] if r[2] else [])
        | "WriteFrontier" >> beam.io.WriteToText(out_prefix + "-frontier", ".jsonl")
    )
    (
        results
        | "States" >> beam.FlatMap(_state_line)
        | "WriteState" >> beam.io.WriteToText(out_prefix + "-state", ".jsonl")
    )
    dead | "WriteDead" >> beam.io.WriteToText(out_prefix + "-dead-letters", ".jsonl")


def update_frontier(items: Any, strategy: Strategy[Any], source: str) -> tuple[Any, Any]:
    """The steps every source shares: positioned items in; per URL (url, encoded state,
    latest change as entry JSON / TOMBSTONE / None) and dead-letter JSON out."""
    decoded = items | "Decode" >> DecodeFetchEvents(source)
    events = decoded.events
    clocks = events | "Clock" >> CountCrawledPages()
    keyed = (events, clocks) | "Route" >> RouteFetchEvents(strategy)
    return keyed | "Update" >> UpdateFrontier(strategy), decoded[DEAD]


def _state_line(result: tuple[str, bytes | None, str | None]) -> list[str]:
    url, encoded, _ = result
    if encoded is None:
        return []
    return [json.dumps({"url": url, "state": base64.b64encode(encoded).decode()})]


def run_beam_replay(
    log: Path,
    *,
    strategy_name: str,
    out_prefix: str,
    budget: int,
    seed: int = 0,
    beam_args: list[str] | None = None,
) -> None:
    """Run the replay pipeline with the given Beam pipeline options and wait for it."""
    if strategy_name in ("pagerank", "partial-pagerank"):
        raise ValueError(f"{strategy_name} needs a global recomputation: use the embedded engine")
    strategy = build_strategy(strategy_name, budget=budget, seed=seed)
    options = PipelineOptions(beam_args or [])
    with beam.Pipeline(options=options) as pipeline:
        build_replay(pipeline, log, strategy, out_prefix)
