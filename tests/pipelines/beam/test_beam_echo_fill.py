"""Logs without echo on Beam: the bounded replay fills each missing echo from state in
rounds and ends where the embedded engine does, on a simulated crawl's log with every echo
stripped (and that is where the log with its echoes ends too: tests/pipelines/embedded/
test_echo_fill.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from topical_webs import random_web

from frontierflow.pipelines.beam.replay import run_beam_replay
from frontierflow.pipelines.core.step import is_repeat_fetch
from frontierflow.pipelines.core.strategy import Strategy, change_key
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.evaluation.simulator import simulate_cycles
from frontierflow.pipelines.strategies.baselines import BreadthFirst
from frontierflow.pipelines.strategies.ieca import IecaStrategy
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.schemas.codecs import record_from_dict
from frontierflow.schemas.container import write_container
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.ieca import IecaParams
from frontierflow.state.relevance import Topic
from frontierflow.state.storage.rocksdb import RocksDBStore

LOCAL = ["--runner=FnApiRunner"]


def _strategy(name: str) -> Strategy[Any]:
    if name == "lafc":
        return Lafc(Topic.parse("tcp:2,socket:1"), LafcSettings(control_threshold=0.3, seed=3))
    if name == "bfs":
        return BreadthFirst()
    return IecaStrategy(IecaParams.for_budget(120))


def _latest(lines: list[str]) -> dict[Any, dict[str, Any]]:
    latest: dict[Any, dict[str, Any]] = {}
    for line in lines:
        entry = record_from_dict(FrontierEntry, json_to_record(line, "FrontierEntry"))
        latest[change_key(entry)] = json.loads(line)
    return latest


@pytest.mark.parametrize(
    ("name", "pages", "budget", "cycles"),
    [("ieca", 30, 10, 1), ("lafc", 80, 30, 2), ("bfs", 80, 30, 1)],
)
def test_beam_fills_echoes_as_the_engine_does(
    name: str, pages: int, budget: int, cycles: int, tmp_path: Path, beam_files: Any
) -> None:
    """IECA's distance of a page depends on every page linking it before its fetch, so its
    chain of fills is about as long as the crawl: a small crawl here (docs/RESULTS.md)."""
    events: list[FetchEvent] = []
    simulate_cycles(
        random_web(pages, 11), _strategy(name), [0], budget, cycles, on_event=events.append
    )
    log = tmp_path / "stripped.avro"
    write_container(log, "FetchEvent", [replace(e, echo={}).to_avro() for e in events])

    out = tmp_path / "embedded.jsonl"
    strategy = _strategy(name)
    replay_log(
        log,
        strategy_name=name,
        state_dir=tmp_path / "s",
        out=out,
        step_size=7,
        strategy=strategy,
        fill_echo=True,
    )
    with RocksDBStore(tmp_path / "s", Engine.families_for(strategy)) as store:
        expected_states = {k.decode(): v for k, v in store.items(strategy.family)}
    expected = _latest(out.read_text().splitlines())

    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    rounds = run_beam_replay(
        log,
        strategy_name=name,
        out_prefix=str(prefix),
        budget=120,
        beam_args=LOCAL,
        strategy=_strategy(name),
        fill_echo=True,
    )
    lines, states, dead = beam_files(prefix)
    assert states == expected_states
    assert dead == []
    # a URL fetched after its latest entry has a tombstone, which Beam does not write
    last_fetch: dict[str, int] = {}
    last_cycle: dict[str, int] = {}
    for e in events:
        if not is_repeat_fetch(last_cycle.get(e.url), e.cycle):
            last_cycle[e.url] = e.cycle
            last_fetch[e.url] = e.fetched_at
    waiting = {
        k: v
        for k, v in expected.items()
        if isinstance(k, tuple) or v["emitted_at"] > last_fetch.get(v["url"], -1)
    }
    assert _latest(lines) == waiting
    assert len(states) > budget and len(waiting) > 5
    # round 1 knows no echo; each later round fills events further down the crawl, and the
    # last one only confirms
    assert rounds >= 3
