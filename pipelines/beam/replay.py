"""The replay pipeline on Apache Beam: the step core's rules, scaled out.

Composite transforms with labelled steps, four shuffles in all:

- `ReadFetchEventLog` (`beam.io`): a log file read through Beam's `FileSystems`, each
  record decoded and checked once: typed `(position, FetchEvent)`s and `DeadLetter`s;
- `DecideRepeatFetches` and `CountCrawledPages` (`beam.exact_clock`): per URL, the step
  core's repeat verdict on its fetches in input order; IECA's global clock, exact and
  distributed, as prefix sums of first fetches per (crawl, bucket of positions);
- `RouteFetchEvents`: per bucket, fetches in input order get the step core's
  `crawl_clock` and become its `keyed_messages`, tagged with (position, index) so every
  key applies them in input order;
- `UpdateFrontier`: per URL, all its messages arrive together and are folded through the
  step core's `apply_messages` from no state (each key is visited once: no state spec);
  out comes a `UrlUpdate`: the final state and the latest change per change key (a key
  owns every change key it emits, so per key is the whole story);
- `HoldPausedHosts` (`beam.hosts`): per queue group, the host rule over its answers
  (deferred ones too: a 429 answers for its host, not its page) gives its pauses; every
  entry emitted inside one is held until it ends, as the embedded engine holds it.

With `fill_echo` (a WARC, another crawler's log: events without echo), the pipeline runs in
rounds (`beam.echo_fill`): routing also sends each event without echo a probe to the key
whose state fills it, with the echo found for it in the round before (`FillEchoes`), and
the fold answers each probe with the echo the key's state implies at that position.

Records cross stages through the coders of `beam.coders` (Avro bytes; no pickling, no
JSON inside the pipeline). The result equals the embedded engine's on the same log: same
clock, same repeats, same per-key order, same functions. Global strategies (the PageRank
baselines) are refused. The bounded form waits for the input to end; `beam.stream` is
the unbounded form.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam import typehints

from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.beam.echo_fill import (
    FILLS,
    MAX_FILL_ROUNDS,
    PROBE,
    Fills,
    echo_at_probe,
    given_fills,
    probe_message,
    run_fill_rounds,
    write_fills,
)
from frontierflow.pipelines.beam.exact_clock import CountCrawledPages, DecideRepeatFetches
from frontierflow.pipelines.beam.hosts import HoldPausedHosts
from frontierflow.pipelines.beam.io import (
    ReadFetchEventLog,
    WriteKeyedStates,
    WriteResults,
    page_answers,
)
from frontierflow.pipelines.beam.options import pipeline_options
from frontierflow.pipelines.beam.revisits import MergeRevisits, ScheduleRevisits
from frontierflow.pipelines.beam.strategy import beam_strategy
from frontierflow.pipelines.core.step import (
    FetchKind,
    LatestChanges,
    apply_messages,
    crawl_clock,
    echo_fill_key,
    keyed_messages,
    seed_message,
)
from frontierflow.pipelines.core.strategy import (
    CrawlClock,
    EchoFill,
    Message,
    Strategy,
)
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.revisit_schedule import RevisitPolicy


class RouteFetchEvents(beam.PTransform):
    """Per (crawl, bucket), fetches in input order with their exact clocks, routed by the
    step core: (url, [(position, index, (crawled, now_ms), message tuple), …])."""

    def __init__(self, strategy: Strategy[Any], filling: bool = False) -> None:
        super().__init__()
        self.strategy = strategy
        self.filling = filling

    def expand(self, pcolls: Any) -> Any:
        if self.filling:
            return self._expand_filling(*pcolls)
        fetches, pages_before = pcolls
        return (
            fetches
            | "BucketFetches" >> beam.GroupByKey()
            | "Route"
            >> beam.FlatMap(
                route_bucket, self.strategy, beam.pvalue.AsSingleton(pages_before)
            ).with_output_types(typehints.KV[str, typehints.Any])
        )

    def _expand_filling(self, fetches: Any, pages_before: Any, fills: Any) -> Any:
        """`FillEchoes`: the bucket's fetches and the echoes found for them, joined by bucket."""
        return (
            {"fetches": fetches, "fills": fills}
            | "FillEchoes" >> beam.CoGroupByKey()
            | "RouteFilled"
            >> beam.FlatMap(
                route_filled_bucket, self.strategy, beam.pvalue.AsSingleton(pages_before)
            ).with_output_types(typehints.KV[str, typehints.Any])
        )


def route_bucket(
    grouped: tuple[tuple[str, int], Iterable[tuple[int, int, bytes]]],
    strategy: Strategy[Any],
    pages_before: dict[tuple[str, int], int],
) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """A bucket's fetches in input order: the step core's clock, then its routing; one
    element per URL with all its messages from the bucket (fewer elements to shuffle)."""
    key, fetches = grouped
    yield from _route_fetches(key, fetches, strategy, pages_before, None)


def route_filled_bucket(
    grouped: tuple[tuple[str, int], dict[str, Iterable[Any]]],
    strategy: Strategy[Any],
    pages_before: dict[tuple[str, int], int],
) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """`route_bucket` when echoes are filled: an event without echo gets the one found for
    its position in the last round, and sends a probe to the key whose state fills it."""
    key, joined = grouped
    fills = {position: dict(echo) for position, echo in joined["fills"]}
    yield from _route_fetches(key, joined["fetches"], strategy, pages_before, fills)


def _route_fetches(
    key: tuple[str, int],
    fetches: Iterable[tuple[int, int, bytes]],
    strategy: Strategy[Any],
    pages_before: dict[tuple[str, int], int],
    fills: dict[int, dict[str, str]] | None,
) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    pages = pages_before.get(key, 0)
    by_url: dict[str, list[tuple[Any, ...]]] = {}
    for position, kind, encoded in sorted(fetches, key=lambda f: f[0]):
        event = decode_record(FetchEvent, encoded)
        clock = crawl_clock(pages, kind != FetchKind.FIRST, event.fetched_at)
        pages = clock.crawled
        now = (clock.crawled, clock.now_ms)
        if fills is not None:
            fill_key = echo_fill_key(strategy, event)
            if fill_key is not None:
                by_url.setdefault(fill_key, []).append((position, -1, now, probe_message(event)))
                echo = fills.get(position)
                if echo:
                    event = replace(event, echo=echo)
        repeat = kind == FetchKind.REPEAT
        for index, (url, message) in enumerate(keyed_messages(strategy, event, repeat)):
            by_url.setdefault(url, []).append((position, index, now, message_tuple(message)))
    yield from by_url.items()


def message_tuple(message: Message) -> tuple[Any, ...]:
    """A message as it crosses Beam stages: (type name, fields…), primitives only."""
    return (type(message).__name__, *message)


_MESSAGE_TYPES: dict[str, Any] = {cls.__name__: cls for cls in typing.get_args(Message)}
_WITH_TUPLES = frozenset(
    name
    for name, cls in _MESSAGE_TYPES.items()
    if any(typing.get_origin(hint) is tuple for hint in typing.get_type_hints(cls).values())
)
"""The messages with a tuple field (`PageSeen`'s links and vector), which a coder may hand
back as a list."""


def message_of(t: tuple[Any, ...]) -> Message:
    """The message a `message_tuple` stands for (lists from a coder become tuples). Every
    field is there, so the tuple's tail is the message's (`_make` checks the count): one
    is built per link on the other side of a shuffle."""
    name = t[0]
    if name in _WITH_TUPLES:
        return _MESSAGE_TYPES[name](*(tuple(f) if isinstance(f, list) else f for f in t[1:]))
    return _MESSAGE_TYPES[name]._make(t[1:])


class UpdateFrontier(beam.PTransform):
    """Per URL: all its messages arrive together after the shuffle and are folded in input
    order through the step core, from no state: a bounded replay visits each key once, so
    it needs no state spec."""

    def __init__(self, strategy: Strategy[Any], probes: bool = False) -> None:
        super().__init__()
        self.strategy = strategy
        self.probes = probes

    def expand(self, keyed: Any) -> Any:
        grouped = keyed | "ByUrl" >> beam.GroupByKey()
        if not self.probes:
            return grouped | "FoldInOrder" >> beam.Map(
                fold_messages, self.strategy
            ).with_output_types(UrlUpdate)
        folded = grouped | "FoldAndProbe" >> beam.FlatMap(
            fold_with_probes, self.strategy
        ).with_outputs(FILLS, main="updates")
        updates = folded.updates
        updates.element_type = UrlUpdate
        return updates, folded[FILLS]


def fold_messages(
    grouped: tuple[str, Iterable[list[tuple[int, int, tuple[int, int], tuple[Any, ...]]]]],
    strategy: Strategy[Any],
) -> UrlUpdate:
    """One URL's messages (in batches, one per bucket) sorted by (position, index) through
    `apply_messages`."""
    url, batches = grouped
    messages = [message for batch in batches for message in batch]
    latest: LatestChanges = {}
    state = apply_messages(
        strategy,
        url,
        None,
        (
            (CrawlClock(*clock), message_of(message))
            for _, _, clock, message in sorted(messages, key=lambda m: m[:2])
        ),
        latest,
    )
    encoded = None if state is None else strategy.encode_state(state)
    return UrlUpdate(url, encoded, tuple(latest.values()))


def fold_with_probes(
    grouped: tuple[str, Iterable[list[tuple[int, int, tuple[int, int], tuple[Any, ...]]]]],
    strategy: Strategy[Any],
) -> Iterator[Any]:
    """`fold_messages`, answering probes on the way: at a probe the key's state as it stands
    (before the probing event's own messages, which come after it at its position) gives
    the echo of that event (the step core's `with_echo_from_state`), tagged `FILLS` as
    (crawl id, position, echo) when there is one."""
    url, batches = grouped
    messages = sorted((m for batch in batches for m in batch), key=lambda m: m[:2])
    latest: LatestChanges = {}
    state = None
    for position, _, clock, message in messages:
        if message[0] == PROBE:
            crawl_id, echo = echo_at_probe(strategy, message, state)
            if echo:
                yield beam.pvalue.TaggedOutput(FILLS, (crawl_id, position, echo))
            continue
        state = apply_messages(
            strategy, url, state, ((CrawlClock(*clock), message_of(message)),), latest
        )
    encoded = None if state is None else strategy.encode_state(state)
    yield UrlUpdate(url, encoded, tuple(latest.values()))


def apply_encoded(
    strategy: Strategy[Any],
    key: str,
    raw: bytes | None,
    messages: Iterable[tuple[int, int, tuple[Any, ...]]],
) -> tuple[bytes | None, LatestChanges]:
    """Apply (crawled, now_ms, message tuple)s in order to `key`'s encoded state `raw`
    (None: no state yet) with the step core's `apply_messages`: the per-URL step of the
    unbounded form, whose Beam state holds encoded states. Returns the encoded new state
    (None while the key still has none) and the latest change per change key."""
    current = None if raw is None else strategy.decode_state(raw)
    latest: LatestChanges = {}
    current = apply_messages(
        strategy,
        key,
        current,
        ((CrawlClock(crawled, now_ms), message_of(m)) for crawled, now_ms, m in messages),
        latest,
    )
    return (None if current is None else strategy.encode_state(current)), latest


class ReplayFrontier(beam.PTransform):
    """The steps every bounded source shares: checked `(position, FetchEvent)`s in (deferred
    answers too), one `UrlUpdate` per URL out. `seeds` are applied before the log, as the
    embedded engine's replay applies them; with `hosts`, entries emitted inside their
    group's pause are held (`beam.hosts`), as the embedded engine holds them. With
    `filling`, the input is (events, fills): the echoes of events without one are taken
    from the fills (((crawl id, bucket), (position, echo))s, `beam.echo_fill`), and out
    come the updates and the echoes this round finds, (crawl id, position, echo)s. With a
    `revisit` policy, each URL's revisit entry is folded into its update (`beam.revisits`)
    and out come the updates and the revisit states, (key, bytes)s as the embedded engine
    keeps them."""

    def __init__(
        self,
        strategy: Strategy[Any],
        seeds: Seeds | None = None,
        hosts: HostPolicy | None = DEFAULT_POLICY,
        filling: bool = False,
        revisit: RevisitPolicy | None = None,
    ) -> None:
        super().__init__()
        if filling and seeds is not None and seeds.urls:
            raise ValueError("seeds and the echo fill together are not supported")
        if filling and revisit is not None:
            raise ValueError("revisits and the echo fill together are not supported")
        if revisit is not None and not strategy.revisits_pages:
            raise ValueError(f"{strategy.name} schedules its own revisits: no --revisit")
        self.strategy = strategy
        self.seeds = seeds
        self.hosts = hosts
        self.filling = filling
        self.revisit = revisit

    def expand(self, pcolls: Any) -> Any:
        strategy = self.strategy
        events, fills = pcolls if self.filling else (pcolls, None)
        pages = page_answers(events)
        repeats = DecideRepeatFetches(strategy.learns_from_repeats, revisit=self.revisit)
        fetches = pages | "Repeats" >> repeats
        if self.revisit is not None:
            fetches, visits, records = fetches
        pages_before = fetches | "Clock" >> CountCrawledPages()
        if fills is None:
            keyed = (fetches, pages_before) | "Route" >> RouteFetchEvents(strategy)
        else:
            routed = (fetches, pages_before, fills)
            keyed = routed | "Route" >> RouteFetchEvents(strategy, filling=True)
        if self.seeds is not None and self.seeds.urls:
            seeded = events.pipeline | "Seeds" >> beam.Create(seed_messages(strategy, self.seeds))
            keyed = (keyed, seeded) | "WithSeeds" >> beam.Flatten()
        updates = keyed | "Update" >> UpdateFrontier(strategy, probes=self.filling)
        found = None
        if self.filling:
            updates, found = updates
        if self.revisit is not None:
            schedule = ScheduleRevisits(self.revisit, strategy.name)
            decisions, hosts = visits | "Revisits" >> schedule
            updates = (updates, decisions) | "WithRevisits" >> MergeRevisits()
            found = (records, hosts) | "RevisitStates" >> beam.Flatten()
        if self.hosts is not None:
            updates = (events, updates) | "Hosts" >> HoldPausedHosts(self.hosts)
        return updates if found is None else (updates, found)


@dataclass(frozen=True, slots=True)
class Seeds:
    """Starting pages of a replay's crawl, applied before its first event at `at_ms`."""

    urls: tuple[str, ...]
    crawl_id: str = "default"
    at_ms: int = 0


def seed_messages(strategy: Strategy[Any], seeds: Seeds) -> list[tuple[str, list[Any]]]:
    """Each seed's message for its `seed_key`, at position −1 (before every event) and a
    crawl clock of 0 pages: what `Engine.seed` applies to a fresh state."""
    out = []
    for i, url in enumerate(seeds.urls):
        key, message, clock = seed_message(strategy, url, seeds.crawl_id, 0, 0, seeds.at_ms)
        out.append((key, [(-1, i, (clock.crawled, clock.now_ms), message_tuple(message))]))
    return out


def build_replay(
    pipeline: beam.Pipeline,
    log: Path | str,
    strategy: Strategy[Any],
    out_prefix: str,
    fills: Fills | None = None,
    seeds: Seeds | None = None,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    revisit: RevisitPolicy | None = None,
) -> None:
    """Read `log`, update the frontier, write `<out>-frontier*.jsonl`, `<out>-state*.jsonl`
    and `<out>-dead-letters*.jsonl`; with `fills` ((crawl id, position) → echo: one round
    of the echo fill), also `<out>-echo-fills*.jsonl`, the echoes this round found; with
    `revisit`, also `<out>-revisits*.jsonl`, the revisit states."""
    events, dead = pipeline | "Read" >> ReadFetchEventLog(log)
    if fills is None:
        frontier = ReplayFrontier(strategy, seeds, hosts, revisit=revisit)
        updates = events | "Frontier" >> frontier
        if revisit is not None:
            updates, states = updates
            states | "WriteRevisits" >> WriteKeyedStates(out_prefix + "-revisits")
        (updates, dead) | "Write" >> WriteResults(out_prefix)
        return
    frontier = ReplayFrontier(strategy, seeds, hosts, filling=True)
    updates, found = (events, given_fills(pipeline, fills)) | "Frontier" >> frontier
    (updates, dead) | "Write" >> WriteResults(out_prefix)
    write_fills(found, out_prefix)


def run_beam_replay(
    log: Path | str,
    *,
    strategy_name: str,
    out_prefix: str,
    budget: int,
    seed: int = 0,
    beam_args: list[str] | None = None,
    strategy: Strategy[Any] | None = None,
    fill_echo: bool = False,
    max_fill_rounds: int = MAX_FILL_ROUNDS,
    seeds: Seeds | None = None,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    revisit: RevisitPolicy | None = None,
) -> int:
    """Run the replay pipeline with the given Beam pipeline options and wait for it; returns
    how many times it ran (more than once only to fill echoes).

    `strategy`, when given, is used as it is (LAFC with its topic, say); otherwise it is
    built from `strategy_name`, `budget` and `seed`. With `fill_echo`, events without echo
    get the one their strategy derives from state, found in rounds (module docstring): the
    pipeline runs until a round finds the echoes it was given, at most `max_fill_rounds`
    times. `hosts`: the host rule's settings (`state.hosts.HostPolicy`; None: no entry
    is held). `revisit`: when pages are asked for again (None: never; not with `fill_echo`)."""
    strategy = beam_strategy(strategy_name, budget=budget, seed=seed, strategy=strategy)
    options = pipeline_options(beam_args)
    if not fill_echo or strategy.echo_fill is EchoFill.NONE:
        with beam.Pipeline(options=options) as pipeline:
            build_replay(
                pipeline, log, strategy, out_prefix, seeds=seeds, hosts=hosts, revisit=revisit
            )
        return 1
    if revisit is not None:
        raise ValueError("revisits and the echo fill together are not supported")

    def run_round(fills: Fills) -> None:
        with beam.Pipeline(options=options) as pipeline:
            build_replay(pipeline, log, strategy, out_prefix, fills, hosts=hosts)

    return run_fill_rounds(run_round, out_prefix, max_fill_rounds)
