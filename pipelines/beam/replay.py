"""The replay pipeline on Apache Beam: the step core's rules, scaled out.

Composite transforms with labelled steps, four shuffles in all:

- `ReadFetchEventLog` (`beam.io`): a log file read through Beam's `FileSystems`, each
  record decoded and checked once: typed `(position, FetchEvent)`s and `DeadLetter`s;
- `DecideRepeatFetches` and `CountCrawledPages` (`beam.exact_clock`): per URL, the step
  core's repeat verdict on its fetches in input order; IECA's global clock, exact and
  distributed, as prefix sums of first fetches per (crawl, bucket of positions);
- `RouteFetchEvents`: per bucket, fetches in input order get the step core's
  `crawl_clock` and are routed by the strategy; their messages leave as one block per
  shard of their keys (`beam.shard_blocks`: a block, not a key, is what crosses the
  shuffle);
- `UpdateFrontier`: per shard, its blocks arrive together; each key's messages are put in
  input order and folded through the step core's `apply_messages` from no state (each key
  is visited once: no state spec); out comes a `UrlUpdate` per key: the final state and
  the latest change per change key (a key owns every change key it emits, so per key is
  the whole story);
- `HoldPausedHosts` (`beam.hosts`): per queue group, the host rule over its answers
  (deferred ones too: a 429 answers for its host, not its page) gives its pauses; every
  entry emitted inside one is held until it ends, as the embedded engine holds it.

With `fill_echo` (a WARC, another crawler's log: events without echo), the pipeline runs in
rounds (`beam.echo_fill`): routing also sends each event without echo a probe to the key
whose state fills it, with the echo found for it in the round before (`FillEchoes`), and
the fold answers each probe with the echo the key's state implies at that position.

Records cross stages through the coders of `beam.coders` (Avro bytes; no pickling, no
JSON inside the pipeline), blocks as primitives (`FastPrimitivesCoder`). The result
equals the embedded engine's on the same log: same clock, same repeats, same per-key
order, same functions. Global strategies (the PageRank
baselines) are refused. The bounded form waits for the input to end; `beam.stream` is
the unbounded form.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam import typehints

from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.beam.echo_fill import (
    FILLS,
    MAX_FILL_ROUNDS,
    Fills,
    given_fills,
    run_fill_rounds,
    write_fills,
)
from frontierflow.pipelines.beam.exact_clock import CountCrawledPages, DecideRepeatFetches
from frontierflow.pipelines.beam.hosts import GroupPauses, HoldPausedHosts, hold_update
from frontierflow.pipelines.beam.io import (
    ReadFetchEventLog,
    WriteKeyedStates,
    WriteResults,
    page_answers,
)
from frontierflow.pipelines.beam.options import pipeline_options, run_pipeline
from frontierflow.pipelines.beam.revisits import MergeRevisits, ScheduleRevisits
from frontierflow.pipelines.beam.shard_blocks import (
    MIN_FOLD_SHARDS,
    fold_blocks,
    fold_blocks_probing,
    fold_shards,
    message_of,
    route_blocks,
    seed_blocks,
)
from frontierflow.pipelines.beam.strategy import beam_strategy
from frontierflow.pipelines.core.step import LatestChanges, apply_messages, seed_message
from frontierflow.pipelines.core.strategy import (
    CrawlClock,
    EchoFill,
    Message,
    Strategy,
)
from frontierflow.state.host_pauses import Pause
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.revisit_schedule import RevisitPolicy


class RouteFetchEvents(beam.PTransform):
    """Per (crawl, bucket), fetches in input order with their exact clocks, routed by the
    step core into blocks: (shard, encoded `Block`)s (`beam.shard_blocks`)."""

    def __init__(self, strategy: Strategy[Any], shards: int, filling: bool = False) -> None:
        super().__init__()
        self.strategy = strategy
        self.shards = shards
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
                route_bucket,
                self.strategy,
                beam.pvalue.AsSingleton(pages_before),
                self.shards,
            ).with_output_types(typehints.KV[int, bytes])
        )

    def _expand_filling(self, fetches: Any, pages_before: Any, fills: Any) -> Any:
        """`FillEchoes`: the bucket's fetches and the echoes found for them, joined by bucket."""
        return (
            {"fetches": fetches, "fills": fills}
            | "FillEchoes" >> beam.CoGroupByKey()
            | "RouteFilled"
            >> beam.FlatMap(
                route_filled_bucket,
                self.strategy,
                beam.pvalue.AsSingleton(pages_before),
                self.shards,
            ).with_output_types(typehints.KV[int, bytes])
        )


def route_bucket(
    grouped: tuple[tuple[str, int], Iterable[tuple[int, int, bytes]]],
    strategy: Strategy[Any],
    pages_before: dict[tuple[str, int], int],
    shards: int,
) -> list[tuple[int, bytes]]:
    """A bucket's fetches through `route_blocks`."""
    bucket, fetches = grouped
    return route_blocks(bucket, fetches, strategy, pages_before, shards)


def route_filled_bucket(
    grouped: tuple[tuple[str, int], dict[str, Iterable[Any]]],
    strategy: Strategy[Any],
    pages_before: dict[tuple[str, int], int],
    shards: int,
) -> list[tuple[int, bytes]]:
    """`route_blocks` with the echoes found for the bucket's events in the last round."""
    bucket, joined = grouped
    fills = {position: dict(echo) for position, echo in joined["fills"]}
    return route_blocks(bucket, joined["fetches"], strategy, pages_before, shards, fills)


class UpdateFrontier(beam.PTransform):
    """Per shard of the URL space: its blocks arrive together after the shuffle, each key's
    messages are folded in input order through the step core from no state (a bounded
    replay visits each key once, so it needs no state spec), one `UrlUpdate` per key out.
    With `pauses` (the host rule's, `beam.hosts.GroupPauses`), the entries emitted inside
    one are held there, in the fold's own stage (no stage after it decodes the updates
    again to hold them)."""

    def __init__(self, strategy: Strategy[Any], probes: bool = False, pauses: Any = None) -> None:
        super().__init__()
        self.strategy = strategy
        self.probes = probes
        self.pauses = pauses

    def expand(self, blocks: Any) -> Any:
        grouped = blocks | "ByShard" >> beam.GroupByKey()
        pauses = () if self.pauses is None else (beam.pvalue.AsDict(self.pauses),)
        if not self.probes:
            return grouped | "FoldInOrder" >> beam.FlatMap(
                fold_shard, self.strategy, *pauses
            ).with_output_types(UrlUpdate)
        folded = grouped | "FoldAndProbe" >> beam.FlatMap(
            fold_shard_probing, self.strategy, *pauses
        ).with_outputs(FILLS, main="updates")
        updates = folded.updates
        updates.element_type = UrlUpdate
        return updates, folded[FILLS]


def fold_shard(
    grouped: tuple[int, Iterable[bytes]],
    strategy: Strategy[Any],
    pauses: Mapping[str, list[Pause]] | None = None,
) -> list[UrlUpdate]:
    """Each key of the shard folded from its messages in input order, the entries emitted
    inside a pause of `pauses` held."""
    updates = fold_blocks(strategy, grouped[1])
    return [hold_update(u, pauses) for u in updates] if pauses else updates


def fold_shard_probing(
    grouped: tuple[int, Iterable[bytes]],
    strategy: Strategy[Any],
    pauses: Mapping[str, list[Pause]] | None = None,
) -> Iterator[Any]:
    """`fold_shard`, with each echo found at a probe tagged `FILLS` as (crawl id,
    position, echo)."""
    updates, found = fold_blocks_probing(strategy, grouped[1])
    for update in updates:
        yield hold_update(update, pauses) if pauses else update
    for fill in found:
        yield beam.pvalue.TaggedOutput(FILLS, fill)


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
        shards: int = MIN_FOLD_SHARDS,
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
        self.shards = shards

    def expand(self, pcolls: Any) -> Any:
        strategy, shards = self.strategy, self.shards
        events, fills = pcolls if self.filling else (pcolls, None)
        pages = page_answers(events)
        repeats = DecideRepeatFetches(strategy.learns_from_repeats, revisit=self.revisit)
        fetches = pages | "Repeats" >> repeats
        if self.revisit is not None:
            fetches, visits, records = fetches
        pages_before = fetches | "Clock" >> CountCrawledPages()
        if fills is None:
            blocks = (fetches, pages_before) | "Route" >> RouteFetchEvents(strategy, shards)
        else:
            routed = (fetches, pages_before, fills)
            blocks = routed | "Route" >> RouteFetchEvents(strategy, shards, filling=True)
        if self.seeds is not None and self.seeds.urls:
            seeded = seed_blocks(seed_messages(strategy, self.seeds), shards)
            seeded_blocks = events.pipeline | "Seeds" >> beam.Create(seeded)
            blocks = (blocks, seeded_blocks) | "WithSeeds" >> beam.Flatten()
        # the host rule's pauses are held in the fold, unless revisits join the updates first
        pauses = None
        if self.hosts is not None and self.revisit is None:
            pauses = events | "Hosts" >> GroupPauses(self.hosts)
        updates = blocks | "Update" >> UpdateFrontier(strategy, self.filling, pauses)
        found = None
        if self.filling:
            updates, found = updates
        if self.revisit is not None:
            schedule = ScheduleRevisits(self.revisit, strategy.name)
            decisions, hosts = visits | "Revisits" >> schedule
            updates = (updates, decisions) | "WithRevisits" >> MergeRevisits()
            found = (records, hosts) | "RevisitStates" >> beam.Flatten()
        if self.hosts is not None and pauses is None:
            updates = (events, updates) | "Hosts" >> HoldPausedHosts(self.hosts)
        return updates if found is None else (updates, found)


@dataclass(frozen=True, slots=True)
class Seeds:
    """Starting pages of a replay's crawl, applied before its first event at `at_ms`."""

    urls: tuple[str, ...]
    crawl_id: str = "default"
    at_ms: int = 0


def seed_messages(strategy: Strategy[Any], seeds: Seeds) -> list[tuple[str, Message, CrawlClock]]:
    """Each seed's (`seed_key`, message, clock) in order, at a crawl clock of 0 pages: what
    `Engine.seed` applies to a fresh state, before every event (position −1 in
    `seed_blocks`)."""
    return [seed_message(strategy, url, seeds.crawl_id, 0, 0, seeds.at_ms) for url in seeds.urls]


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
    read = ReadFetchEventLog(log)
    events, dead = pipeline | "Read" >> read
    shards = fold_shards(read.size)
    if fills is None:
        frontier = ReplayFrontier(strategy, seeds, hosts, revisit=revisit, shards=shards)
        updates = events | "Frontier" >> frontier
        if revisit is not None:
            updates, states = updates
            states | "WriteRevisits" >> WriteKeyedStates(out_prefix + "-revisits")
        (updates, dead) | "Write" >> WriteResults(out_prefix)
        return
    frontier = ReplayFrontier(strategy, seeds, hosts, filling=True, shards=shards)
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
        run_pipeline(
            options,
            lambda pipeline: build_replay(
                pipeline, log, strategy, out_prefix, seeds=seeds, hosts=hosts, revisit=revisit
            ),
        )
        return 1
    if revisit is not None:
        raise ValueError("revisits and the echo fill together are not supported")

    def run_round(fills: Fills) -> None:
        run_pipeline(
            options,
            lambda pipeline: build_replay(pipeline, log, strategy, out_prefix, fills, hosts=hosts),
        )

    return run_fill_rounds(run_round, out_prefix, max_fill_rounds)
