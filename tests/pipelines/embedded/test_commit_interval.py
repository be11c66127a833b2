"""A commit interval: every step flushes its outputs, the state commits every N steps.

The steps of an interval read each other's writes (the open transaction and the cache of
hot states), so the outputs and the committed state equal those of committing every step;
the observer hears of each step once it is committed; a step that fails takes the steps
not committed yet with it, as a crash would, and leaves nothing of them in the cache.
(The kill -9 tests of a replay with an interval are in test_replay.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from list_sink import ListSink

from frontierflow.connectors.base import InputItem, Position
from frontierflow.pipelines.embedded.engine import Engine, EngineStats
from frontierflow.pipelines.embedded.observer import StepReport
from frontierflow.pipelines.embedded.step import Step
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.storage.codec import decode_u64, encode_u64
from frontierflow.state.storage.format import CRAWLED_FAMILY, INPUT_POSITION, crawled_key
from frontierflow.state.storage.memory import InMemoryStore
from frontierflow.state.storage.store import META_FAMILY

STEP = 10


class _Reports:
    def __init__(self) -> None:
        self.reports: list[StepReport] = []

    def step_committed(self, report: StepReport) -> None:
        self.reports.append(report)

    def input_lag(self, records: int) -> None:
        pass


class _Boom(RuntimeError):
    pass


def _items(fetch_events: Callable[..., list[dict[str, Any]]], n: int = 60) -> list[InputItem]:
    records = fetch_events(
        n, seed=5, pages=80, url="https://h{host}.example.org/{page}", hosts=7, max_outlinks=12
    )
    return [(Position(None, i), FetchEvent.from_avro(r), b"") for i, r in enumerate(records)]


def _engine(
    commit_every: int, name: str = "ieca", **kwargs: Any
) -> tuple[Engine[Any], InMemoryStore, ListSink]:
    strategy = build_strategy(name, budget=40)  # IECA's k = 1: δ_t and α move every page
    store = InMemoryStore(Engine.families_for(strategy))
    sink = ListSink()
    engine = Engine(strategy, store, sink, commit_every=commit_every, **kwargs)
    return engine, store, sink


def _run(engine: Engine[Any], items: list[InputItem]) -> None:
    for start in range(0, len(items), STEP):
        engine.run_step(items[start : start + STEP])


def _dump(store: InMemoryStore) -> dict[str, dict[bytes, bytes]]:
    return {family: dict(store.items(family)) for family in store.families}


def _input_position(store: InMemoryStore) -> int | None:
    raw = store.get(META_FAMILY, INPUT_POSITION)
    return None if raw is None else decode_u64(raw)


@pytest.mark.parametrize("name", ["ieca", "bfs"])  # decoded states cached, or bytes
@pytest.mark.parametrize(
    ("commit_every", "hot_states"),
    [(2, 262_144), (4, 8), (100, 0)],  # a cache of 8 drops states of the open interval
)
def test_outputs_and_state_equal_those_of_committing_every_step(
    fetch_events: Callable[..., list[dict[str, Any]]],
    commit_every: int,
    hot_states: int,
    name: str,
) -> None:
    items = _items(fetch_events)
    every, every_store, every_sink = _engine(1, name)
    _run(every, items)
    interval, store, sink = _engine(commit_every, name, hot_states=hot_states)
    _run(interval, items)
    interval.commit_pending()
    assert sink.changes == every_sink.changes  # each step flushed the same entries
    assert _dump(store) == _dump(every_store)
    family = every.strategy.family
    assert len(dict(store.items(family))) > 60  # of 80 pages: most written in several steps
    assert every.stats.commits == 6 and every.stats.steps == 6
    assert interval.stats.steps == 6
    assert interval.stats.commits == -(-6 // commit_every)  # the last one by commit_pending


def test_the_state_commits_only_at_the_end_of_an_interval(
    fetch_events: Callable[..., list[dict[str, Any]]],
) -> None:
    items = _items(fetch_events)
    engine, store, sink = _engine(4)
    _run(engine, items[:30])  # three steps: none committed yet, all flushed
    assert _input_position(store) is None
    assert dict(store.items("ieca")) == {}
    assert len(sink.changes) > 0
    # the open interval's count of first fetches, which the next step goes on from
    assert engine.crawled("c") == engine.stats.events > 20
    assert store.get(META_FAMILY, crawled_key("c")) is None
    _run(engine, items[30:40])  # the fourth step commits the four
    assert _input_position(store) == 40
    assert engine.stats.commits == 1
    _run(engine, items[40:])  # two more steps, not committed until asked
    assert _input_position(store) == 40
    engine.commit_pending()
    assert _input_position(store) == 60
    engine.commit_pending()  # nothing left: no empty commit
    assert engine.stats.commits == 2


def test_the_observer_hears_of_each_step_once_committed(
    fetch_events: Callable[..., list[dict[str, Any]]],
) -> None:
    items = _items(fetch_events)
    observer = _Reports()
    engine, _store, sink = _engine(3, observer=observer)
    _run(engine, items[:20])
    assert observer.reports == []
    _run(engine, items[20:30])
    assert [r.stats.steps for r in observer.reports] == [1, 2, 3]
    assert [r.stats.commits for r in observer.reports] == [0, 0, 0]  # as each step left it
    assert [r.stats.events for r in observer.reports] == sorted(
        {r.stats.events for r in observer.reports}
    )
    assert isinstance(observer.reports[0].stats, EngineStats)
    assert observer.reports[0].stats is not engine.stats
    assert sum(len(r.changes) for r in observer.reports) == len(sink.changes)


def test_a_failed_step_drops_the_uncommitted_steps_and_their_cached_states(
    fetch_events: Callable[..., list[dict[str, Any]]],
) -> None:
    """Step 2 dies after its outputs were flushed: step 1 (not committed) goes with it, and
    the cache forgets step 1's states; the caller goes on from the committed position (0),
    and the end is the same as an uninterrupted run's."""
    items = _items(fetch_events)
    fail = {"on": False}

    def hook(phase: str) -> None:
        if fail["on"] and phase == "flushed":
            raise _Boom(phase)

    reference, ref_store, ref_sink = _engine(1)
    _run(reference, items)
    engine, store, sink = _engine(3, before_commit=hook)
    _run(engine, items[:10])
    assert len(engine.hot) > 0  # step 1's states, not committed
    fail["on"] = True
    with pytest.raises(_Boom):
        _run(engine, items[10:20])
    fail["on"] = False
    assert len(engine.hot) == 0 and not engine.hot.complete
    assert _input_position(store) is None and dict(store.items("ieca")) == {}
    sink.rewind(None)  # as a restarted job does: from the committed output position
    _run(engine, items)
    engine.commit_pending()
    assert sink.changes == ref_sink.changes
    assert _dump(store) == _dump(ref_store)


def test_a_failed_commit_clears_the_cache_and_the_engine_goes_on(
    fetch_events: Callable[..., list[dict[str, Any]]],
) -> None:
    items = _items(fetch_events)
    engine, store, _sink = _engine(2)
    _run(engine, items[:20])
    assert _input_position(store) == 20
    original = store.transaction

    def failing() -> Any:
        txn = original()

        def commit() -> None:
            raise _Boom("disk full")

        txn.commit = commit  # type: ignore[method-assign]
        return txn

    store.transaction = failing  # type: ignore[method-assign]
    _run(engine, items[20:30])  # opens the interval's transaction
    with pytest.raises(_Boom):
        _run(engine, items[30:40])
    assert len(engine.hot) == 0
    assert _input_position(store) == 20
    store.transaction = original  # type: ignore[method-assign]
    _run(engine, items[20:40])
    assert _input_position(store) == 40


def test_global_strategies_commit_every_step_and_bad_intervals_are_refused() -> None:
    strategy = build_strategy("pagerank", budget=40)
    store = InMemoryStore(Engine.families_for(strategy))
    assert Engine(strategy, store, ListSink(), commit_every=8).commit_every == 1
    ieca = build_strategy("ieca", budget=40)
    with pytest.raises(ValueError, match="commit interval"):
        Engine(ieca, InMemoryStore(Engine.families_for(ieca)), ListSink(), commit_every=0)


def test_a_step_writes_the_fetched_cycle_and_count_only_of_first_fetches(
    fetch_events: Callable[..., list[dict[str, Any]]],
) -> None:
    """A repeat (a 208 answer, say) moves neither its page's fetched cycle nor its crawl's
    count: its step writes neither, a first fetch's step both."""
    engine, store, _ = _engine(1)
    item = _items(fetch_events, 1)[0]
    event = item[1]
    assert isinstance(event, FetchEvent)
    written: list[set[tuple[str, bytes]]] = []
    for _ in range(2):  # the page's first fetch, then a repeat of it
        step: Step[Any] = Step(engine)
        keys: set[tuple[str, bytes]] = set()
        put_many = step.txn.put_many

        def spy(
            family: str, items: Any, keys: set[tuple[str, bytes]] = keys, put_many: Any = put_many
        ) -> None:
            items = list(items)
            keys.update((family, key) for key, _ in items)
            put_many(family, items)

        step.txn.put_many = spy  # type: ignore[method-assign]
        step.txn.put = lambda f, k, v: spy(f, [(k, v)])  # type: ignore[method-assign]
        step.prefetch([item])
        step.event(event)
        step.apply_pending()
        step.write_states()
        step.txn.commit()
        engine._txn = None  # the next step starts a transaction of its own
        written.append(keys)
        assert store.get(META_FAMILY, crawled_key(event.crawl_id)) == encode_u64(1)
    ours = {(CRAWLED_FAMILY, event.url.encode()), (META_FAMILY, crawled_key(event.crawl_id))}
    assert ours <= written[0] and not ours & written[1]
