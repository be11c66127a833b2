"""The replay pipeline on Apache Beam: the embedded engine's operators, scaled out.

Composite transforms with labelled steps:

- `ReadFetchEventLog`: a log file (Avro container or JSON lines) as positioned items, read
  through Beam's `FileSystems`, so `gs://` and any other registered scheme work;
- `DecodeFetchEvents`: valid FetchEvents on the main output, dead letters on `dead`;
- `CountCrawledPages`: IECA's global clock, exact: every event's count of distinct pages
  fetched so far, computed over (position, url, cycle) triples in one ordered pass. It is
  the stage that decides repeats (the rule of `engine.is_repeat_fetch`): a repeat is
  dropped, or, for a strategy that `learns_from_repeats` (LAFC), let through marked as a
  repeat, with the count so far (the page does not count again);
- `RouteFetchEvents`: each counted event becomes the keyed messages of `Routed.messages`
  (`keyed_messages`, the one routing function of every Beam form; a repeat becomes only
  its `Reinforce`, with `fresh=False`, as in the engine's `_Step.event`), tagged with
  (position, index) so every key can apply them in input order;
- `UpdateFrontier`: per URL, the messages sorted by (position, index) are folded through
  the strategy's own `apply` onto the state held in a Beam state spec (encoded with the
  strategy's codec); out come the final state and the latest frontier change per
  `change_key` among the changes this key emitted (LAFC's reply requests are one
  parent's, kept per (url, via); a key owns every change key it emits, so per key is
  the whole story).

The result equals the embedded engine's on the same log: same clock, same repeats, same
per-key order, same function. Global strategies (the PageRank baselines) are refused.
`CountCrawledPages` waits for the input to end; `beam_stream` is the unbounded form.
"""

from __future__ import annotations

import base64
import json
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

from frontierflow.pipelines.core.step import (
    LatestChanges,
    apply_messages,
    crawl_clock,
    is_repeat_fetch,
    keyed_messages,
)
from frontierflow.pipelines.core.strategy import (
    CrawlClock,
    GlobalStrategy,
    Message,
    Strategy,
    change_key,
)
from frontierflow.pipelines.core.validate import InvalidEvent, validate_event
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.codecs import AvroCodec, CodecError, record_from_dict
from frontierflow.schemas.container import CONTAINER_MAGIC, container_log, jsonl_log
from frontierflow.schemas.jsonl import json_to_record, record_to_json
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    Removal,
)

DEAD = "dead"

# Elements crossing stages are plain tuples and Avro bytes, never pickled objects:
# a FetchEvent travels as its single-object encoding, a message as (kind, fields…).
_EVENT = AvroCodec.for_name("FetchEvent")


def event_bytes(event: FetchEvent) -> bytes:
    return _EVENT.encode(event.to_avro())


def _event_of(data: bytes) -> FetchEvent:
    return record_from_dict(FetchEvent, _EVENT.decode(data))


class ReadFetchEventLog(beam.PTransform):
    """(position, Avro bytes or failure tuple, raw) for every record of a log file.

    `path` is a local path or any URL Beam's `FileSystems` knows (`gs://…` with the GCP
    extra installed). It must name exactly one file: positions are record indexes, and two
    files would give two records the same position. Checked when the pipeline is built.
    """

    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.path = one_log_file(str(path))

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "LogPath" >> beam.Create([self.path])
            | "ReadRecords" >> beam.FlatMap(_read_items)
            | "Spread" >> beam.Reshuffle()
        )


def one_log_file(path: str) -> str:
    """The one file `path` names, through `FileSystems.match`; refused clearly otherwise.

    A remote URL (`scheme://`) is taken as given when listing it fails here (no credentials
    where the pipeline is built): the worker that opens it then reports a missing file.
    """
    remote = "://" in path
    try:
        found = FileSystems.match([path])[0].metadata_list
    except (OSError, ValueError) as exc:  # BeamIOError is an IOError
        if remote:
            return path
        raise FileNotFoundError(f"cannot read log {path}: {exc}") from exc
    if not found:
        raise FileNotFoundError(f"no such log: {path}")
    if len(found) > 1:
        raise ValueError(f"log {path} matches {len(found)} files; give one file")
    return str(found[0].path)


def _read_items(path: str) -> Iterator[tuple[int, tuple[str, bytes] | bytes, bytes]]:
    """The records of one log, opened through `FileSystems` (any registered scheme)."""
    with FileSystems.open(path, mime_type="application/octet-stream") as handle:
        is_container = handle.read(4) == CONTAINER_MAGIC
        handle.seek(0)
        items = (
            container_log(handle, "FetchEvent", 0)
            if is_container
            else jsonl_log(handle, "FetchEvent", 0)
        )
        for position, record, raw in items:
            if isinstance(record, CodecError):
                yield position, ("CodecError", str(record).encode()), raw
                continue
            try:
                yield position, event_bytes(record_from_dict(FetchEvent, record)), raw
            except CodecError as exc:
                yield position, ("CodecError", str(exc).encode()), raw


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
    """(position, (crawled count, repeat)) for every event that is not a repeat fetch, and,
    with `keep_repeats`, for every repeat too (count so far, repeat = True)."""

    def __init__(self, keep_repeats: bool = False) -> None:
        super().__init__()
        self.keep_repeats = keep_repeats

    def expand(self, events: Any) -> Any:
        return (
            events
            | "Triples" >> beam.Map(_triple)
            | "AllToOne" >> beam.Map(lambda t: (None, t))
            | "Gather" >> beam.GroupByKey()
            | "Count" >> beam.FlatMap(_count_in_order, self.keep_repeats)
        )


def _triple(item: tuple[int, bytes]) -> tuple[int, str, str, int]:
    event = _event_of(item[1])
    return item[0], event.crawl_id, event.url, event.cycle


def _count_in_order(
    keyed: tuple[None, Iterable[tuple[int, str, str, int]]], keep_repeats: bool = False
) -> Iterator[tuple[int, tuple[int, bool]]]:
    """The engine's count and repeat rule in input order. A repeat keeps the count so far:
    the engine hands a repeat's Reinforce the clock without counting the page again."""
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
    """(url, (position, index, clock, message tuple)) for every counted event (a repeat
    counted only for a strategy that learns from repeats)."""

    def __init__(self, strategy: Strategy[Any]) -> None:
        super().__init__()
        self.strategy = strategy

    def expand(self, pcolls: Any) -> Any:
        events, clocks = pcolls
        return (
            {"event": events, "clock": clocks}
            | "JoinClock" >> beam.CoGroupByKey()
            | "Route"
            >> beam.FlatMap(_route, self.strategy).with_output_types(
                typehints.KV[str, typehints.Any]
            )
        )


def _route(joined: tuple[int, dict[str, list[Any]]], strategy: Strategy[Any]) -> Iterator[Any]:
    position, parts = joined
    if parts["clock"] and parts["event"]:  # a dropped repeat fetch has no clock
        crawled, repeat = parts["clock"][0]
        event = _event_of(parts["event"][0])
        clock = (crawled, event.fetched_at)
        for index, (key, message) in enumerate(keyed_messages(strategy, event, repeat)):
            yield key, (position, index, clock, message_tuple(message))


def message_tuple(message: Message) -> tuple[Any, ...]:
    """A message as it crosses Beam stages: (type name, fields…), no pickling."""
    return (type(message).__name__, *message)


_MESSAGE_TYPES: dict[str, Any] = {cls.__name__: cls for cls in typing.get_args(Message)}


def message_of(t: tuple[Any, ...]) -> Message:
    """The message a `keyed_messages` tuple stands for (lists from a coder become tuples)."""
    fields = (tuple(f) if isinstance(f, list) else f for f in t[1:])
    return _MESSAGE_TYPES[t[0]](*fields)


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
            >> beam.ParDo(_ApplyInOrder(self.strategy)).with_input_types(
                typehints.KV[str, typehints.Iterable[typehints.Any]]
            )
        )


class _ApplyInOrder(beam.DoFn):
    STATE = ReadModifyWriteStateSpec("state", BytesCoder())

    def __init__(self, strategy: Strategy[Any]) -> None:
        self.strategy = strategy

    def process(
        self,
        grouped: tuple[str, Iterable[tuple[int, int, tuple[int, int], tuple[Any, ...]]]],
        state: Any = beam.DoFn.StateParam(STATE),  # noqa: B008 (Beam's idiom)
    ) -> Iterator[tuple[str, bytes | None, tuple[ChangeRecord, ...]]]:
        url, messages = grouped
        ordered = sorted(messages, key=lambda m: m[:2])
        encoded, latest = apply_to_state_cell(
            self.strategy, url, state, ((*clock, message) for _, _, clock, message in ordered)
        )
        yield url, encoded, change_records(latest)


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


ChangeRecord = tuple[str, str | None]
"""A frontier change as it leaves a stateful step: (url, entry JSON), or (url, None) for a
tombstone (the URL was fetched; Kafka: a null value)."""


def change_records(latest: dict[Any, FrontierChange]) -> tuple[ChangeRecord, ...]:
    """The latest change per change key as records, in the order they were last changed."""
    return tuple(_change_record(change) for change in latest.values())


def _change_record(change: FrontierChange) -> ChangeRecord:
    if isinstance(change, Removal):
        return change.url, None
    return change.url, record_to_json(change.to_avro(), "FrontierEntry")


def record_change_key(record: ChangeRecord) -> Any:
    """The `change_key` of a change record (an entry is read back from its JSON)."""
    url, entry_json = record
    if entry_json is None:
        return url
    return change_key(record_from_dict(FrontierEntry, json_to_record(entry_json, "FrontierEntry")))


def build_replay(
    pipeline: beam.Pipeline,
    log: Path | str,
    strategy: Strategy[Any],
    out_prefix: str,
) -> None:
    """Read `log`, update the frontier, write `<out>-frontier*.jsonl`, `<out>-state*.jsonl`
    and `<out>-dead-letters*.jsonl`."""
    items = pipeline | "Read" >> ReadFetchEventLog(log)
    results, dead = update_frontier(items, strategy, str(log))
    write_results(results, dead, out_prefix)


def write_results(results: Any, dead: Any, out_prefix: str) -> None:
    """(url, encoded state, latest change) results and dead letters to the three files."""
    (
        results
        | "Entries" >> beam.FlatMap(_entry_lines)
        | "WriteFrontier" >> beam.io.WriteToText(out_prefix + "-frontier", ".jsonl")
    )
    (
        results
        | "States" >> beam.FlatMap(_state_line)
        | "WriteState" >> beam.io.WriteToText(out_prefix + "-state", ".jsonl")
    )
    dead | "WriteDead" >> beam.io.WriteToText(out_prefix + "-dead-letters", ".jsonl")


def _entry_lines(result: tuple[str, bytes | None, tuple[ChangeRecord, ...]]) -> list[str]:
    """The entries among a URL's latest changes (a file holds upserts, as `FileSink`)."""
    return [entry for _, entry in result[2] if entry is not None]


def update_frontier(items: Any, strategy: Strategy[Any], source: str) -> tuple[Any, Any]:
    """The steps every source shares: positioned items in; per URL (url, encoded state,
    latest change records per change key) and dead-letter JSON out."""
    decoded = items | "Decode" >> DecodeFetchEvents(source)
    events = decoded.events
    clocks = events | "Clock" >> CountCrawledPages(strategy.learns_from_repeats)
    keyed = (events, clocks) | "Route" >> RouteFetchEvents(strategy)
    return keyed | "Update" >> UpdateFrontier(strategy), decoded[DEAD]


def _state_line(result: tuple[str, bytes | None, Any]) -> list[str]:
    url, encoded, _ = result
    if encoded is None:
        return []
    return [json.dumps({"url": url, "state": base64.b64encode(encoded).decode()})]


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
