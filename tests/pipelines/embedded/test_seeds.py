"""Seeds read from a source: applied like `Engine.seed`, committed with their own resume
token (so a restart applies each once), bad ones dead-lettered."""

from __future__ import annotations

from frontierflow.connectors.base import Failed, Position
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.evaluation.simulator import MemoryFrontier
from frontierflow.pipelines.strategies.lafc import Lafc
from frontierflow.schemas.records import DeadLetter, FrontierEntry, SeedRequest
from frontierflow.state.relevance import Topic
from frontierflow.state.storage.format import SEEDS_POSITION
from frontierflow.state.storage.memory import InMemoryStore
from frontierflow.state.storage.store import META_FAMILY


class _Recording(MemoryFrontier):
    def __init__(self) -> None:
        super().__init__()
        self.dead: list[DeadLetter] = []

    def write(self, changes, dead):  # type: ignore[no-untyped-def]
        self.dead += dead
        super().write(changes, dead)


def test_seeds_from_a_source_are_applied_once_with_their_token_and_bad_ones_dead() -> None:
    strategy = Lafc(Topic.parse("socket"))
    store = InMemoryStore(Engine.families_for(strategy))
    sink = _Recording()
    engine = Engine(strategy, store, sink)
    assert engine.seeds_checkpoint() is None
    items = [
        (Position(0, 0), SeedRequest("https://a.test/", 1000, "c", 0), b"s0"),
        (Position(0, 1), SeedRequest("ftp://a.test/", 1001, "c", 0), b"s1"),
        (Position(0, 2), Failed("CodecError", "truncated", b"\xc3"), b"\xc3"),
        (Position(0, 3), SeedRequest("https://b.test/", 1002, "c", 2), b"s3"),
    ]
    engine.run_seeds(items, b"token-after-3", "seeds")
    assert store.get(META_FAMILY, SEEDS_POSITION) == b"token-after-3"
    assert engine.seeds_checkpoint() == b"token-after-3"
    assert [(d.error_class, d.offset, d.source) for d in sink.dead] == [
        ("InvalidUrl", 1, "seeds"),
        ("CodecError", 2, "seeds"),
    ]
    first = sink.pop()
    second = sink.pop()
    assert isinstance(first, FrontierEntry) and isinstance(second, FrontierEntry)
    # a seed asks to be fetched at its push time (the request time): later first
    assert (first.url, first.priority, first.cycle) == ("https://b.test/", 1002.0, 2)
    assert (second.url, second.priority, second.cycle) == ("https://a.test/", 1000.0, 0)
    assert sink.pop() is None
