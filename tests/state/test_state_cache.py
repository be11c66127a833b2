"""The engine's cache of committed states: bounded, generational, never ahead of the store."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from frontierflow.connectors.base import Position
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.evaluation.simulator import MemoryFrontier
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.storage.cache import HotStates
from frontierflow.state.storage.memory import InMemoryStore


def test_keeps_values_until_two_generations_fill() -> None:
    cache = HotStates(4)  # the young generation holds 2; a third key moves it to old
    cache.put_many([("a", b"1"), ("b", b"2")])
    assert cache.get("a") == b"1" and cache.get("b") == b"2"
    cache.put_many([("c", b"3")])  # young {a, b, c} overflows: old {a, b, c}, young {}
    assert len(cache) == 3
    cache.put_many([("d", b"4"), ("e", b"5"), ("f", b"6")])  # old {d, e, f}: a-c dropped
    assert len(cache) == 3
    assert cache.get("a") is None
    assert cache.get("d") == b"4"  # a hit in the old generation moves it to the young one
    cache.put_many([("g", b"7"), ("h", b"8")])  # young {d, g, h} overflows: old {d, g, h}
    assert cache.get("e") is None  # e was not touched: dropped with its generation
    assert cache.get("d") == b"4"
    assert (cache.hits, cache.misses) == (4, 2)


def test_a_deleted_key_is_forgotten() -> None:
    cache = HotStates(8)
    cache.put_many([("a", b"1")])
    cache.put_many([], deleted=["a"])
    assert cache.get("a") is None


def test_capacity_zero_caches_nothing_and_negative_is_refused() -> None:
    cache = HotStates(0)
    cache.put_many([("a", b"1")])
    assert cache.get("a") is None
    with pytest.raises(ValueError, match="capacity"):
        HotStates(-1)


def _event(url: str, outlinks: tuple[str, ...], at: int) -> FetchEvent:
    return FetchEvent(url, at, 200, "f1", "example.org", outlinks=outlinks)


class _Boom(RuntimeError):
    pass


@pytest.mark.parametrize("name", ["ieca", "bfs"])
def test_a_failed_commit_leaves_the_cache_as_the_store(name: str) -> None:
    """A step that dies after its outputs were flushed but before its state committed must
    not leave its states in the cache: the redone step must start from the store's. IECA
    (states never changed in place) keeps decoded states, breadth-first their bytes."""
    strategy = build_strategy(name, budget=100)
    store = InMemoryStore(Engine.families_for(strategy))
    sink = MemoryFrontier()
    fail = {"on": False}

    def hook(phase: str) -> None:
        if fail["on"] and phase == "flushed":
            raise _Boom(phase)

    def cached(key: str, stored: bytes) -> object:
        return strategy.decode_state(stored) if strategy.immutable_states else stored

    engine = Engine(strategy, store, sink, before_commit=hook)
    a = "https://example.org/a"
    b = "https://example.org/b"
    engine.run_step([(Position(None, 0), _event(a, (b,), 1), b"")])
    committed = {k: v for k, v in store.items(strategy.family)}
    assert engine.hot.get(b) == cached(b, committed[b.encode()])
    fail["on"] = True
    with pytest.raises(_Boom):
        engine.run_step([(Position(None, 1), _event(b, (a,), 2), b"")])
    assert engine.hot.get(a) == cached(a, committed[a.encode()])
    assert engine.hot.get(b) == cached(b, committed[b.encode()])
    fail["on"] = False
    engine.run_step([(Position(None, 1), _event(b, (a,), 2), b"")])
    after = {k: v for k, v in store.items(strategy.family)}
    assert engine.hot.get(a) == cached(a, after[a.encode()])
    assert engine.hot.get(b) == cached(b, after[b.encode()])
    assert after[a.encode()] == committed[a.encode()]  # a is crawled: b's link is ignored
    assert after[b.encode()] != committed[b.encode()]  # b is now crawled


def test_a_complete_cache_stays_complete_until_it_drops_a_generation() -> None:
    cache = HotStates(4, complete=True)  # generations of 2
    cache.put_many([("a", b"1"), ("b", b"2"), ("c", b"3")])  # young overflows: old {a,b,c}
    assert cache.complete  # nothing dropped: the old generation was empty
    assert cache.get_many(["a", "x"]) == ({"a": b"1"}, ["x"])  # young {a}
    cache.put_many([("d", b"4"), ("e", b"5")])  # young {a, d, e} overflows: b, c dropped
    assert not cache.complete
    assert not HotStates(0, complete=True).complete  # caching nothing, it holds nothing
    cleared = HotStates(4, complete=True)
    cleared.clear()
    assert not cleared.complete


def _crawl(engine: Engine[object], pages: int) -> None:
    """`pages` events over a ring of pages, each linking to the next three."""
    url = "https://example.org/{}".format
    for n in range(pages):
        links = tuple(url((n + k) % pages) for k in (1, 2, 3))
        engine.run_step([(Position(None, n), _event(url(n), links, n + 1), b"")])


def _count_reads(store: InMemoryStore, family: str) -> list[bytes]:
    """The keys of `family` the store is asked for from now on (a list that grows)."""
    asked: list[bytes] = []
    read = store.get_many

    def counted(name: str, keys: Sequence[bytes]) -> list[bytes | None]:
        if name == family:
            asked.extend(keys)
        return read(name, keys)

    store.get_many = counted
    return asked


def test_an_engine_skips_store_reads_only_while_its_cache_holds_every_state() -> None:
    """A fresh store: every state is in the cache, a key it lacks has none, and the store
    is never asked for one. A tiny cache drops some and asks the store again, with the
    same result; a store with states starts by asking it."""
    strategy = build_strategy("ieca", budget=100)
    results = []
    for capacity, resumed in ((1024, False), (4, False), (1024, True)):
        store = InMemoryStore(Engine.families_for(strategy))
        if resumed:  # a state written before this engine: the cache cannot be complete
            _crawl(Engine(strategy, store, MemoryFrontier()), 1)
        asked = _count_reads(store, strategy.family)
        engine: Engine[object] = Engine(strategy, store, MemoryFrontier(), hot_states=capacity)
        assert engine.hot.complete is not resumed
        _crawl(engine, 12)
        complete = capacity == 1024 and not resumed
        assert engine.hot.complete is complete
        assert (not asked) is complete
        results.append(dict(store.items(strategy.family)))
    assert results[0] == results[1]
    assert len(results[0]) == 12


def test_get_many_is_get_for_each_key() -> None:
    cache = HotStates(4)
    cache.put_many([("a", b"1"), ("b", b"2"), ("c", b"3")])  # overflows: all in old
    found, missing = cache.get_many(["a", "x", "c"])
    assert found == {"a": b"1", "c": b"3"} and missing == ["x"]
    assert (cache.hits, cache.misses) == (2, 1)
    cache.put_many([("d", b"4"), ("e", b"5")])  # young {a, c, d, e} overflows: b dropped
    assert cache.get_many(["b", "a"]) == ({"a": b"1"}, ["b"])


def test_get_many_answers_as_get_with_young_old_and_repeated_keys() -> None:
    """Keys from both generations, repeated and missing (no generation ends on the way):
    the same answers, counts and generations as `get` called key by key on a copy."""
    keys = ["c", "a", "x", "c", "g", "x", "b", "a"]
    caches = [HotStates(10), HotStates(10)]
    for cache in caches:
        cache.put_many([(k, k.encode()) for k in "abcdef"])  # 6 > 5: all in old
        cache.put_many([("g", b"g")])  # young: g
    many, one = caches
    found, missing = many.get_many(keys)
    answers = {key: one.get(key) for key in keys}
    assert found == {k: v for k, v in answers.items() if v is not None}
    assert list(found) == ["c", "a", "g", "b"]  # in the order asked
    assert missing == ["x", "x"]
    assert (many.hits, many.misses) == (4, 2)
    assert many._young == one._young == {"g": b"g", "c": b"c", "a": b"a", "b": b"b"}
    assert many._old == one._old == {"d": b"d", "e": b"e", "f": b"f"}


def test_the_engine_collector_is_back_as_it_was_after_a_step() -> None:
    import gc

    strategy = build_strategy("ieca", budget=100)
    engine = Engine(strategy, InMemoryStore(Engine.families_for(strategy)), MemoryFrontier())
    event = _event("https://example.org/a", ("https://example.org/b",), 1)
    assert gc.isenabled()
    engine.run_step([(Position(None, 0), event, b"")])
    assert gc.isenabled()
    gc.disable()
    try:
        engine.run_step([(Position(None, 1), event, b"")])
        assert not gc.isenabled()
    finally:
        gc.enable()
