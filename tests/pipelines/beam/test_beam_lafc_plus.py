"""LAFC+ on Beam equals LAFC+ in the embedded engine on a recorded multi-cycle crawl.

LAFC+ learns from repeated fetches (a status-208 answer disables the parent's action), sends
credits up the crawl path (one `Reinforce` per ancestor, keyed by that page) and emits
reply requests keyed per (url, via): the bounded pipeline on the local runner and the
unbounded form for any clock window (LAFC+ never reads the crawl clock) must leave the
engine's final state and latest entry per change key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from topical_webs import random_web

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.replay import run_beam_replay
from frontierflow.pipelines.beam.stream_replay import run_beam_stream_replay
from frontierflow.pipelines.core.strategy import change_key
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.evaluation.simulator import simulate_cycles
from frontierflow.pipelines.strategies.lafc_plus import (
    ECHO_ESTIMATE,
    ECHO_PATH,
    LafcPlus,
    LafcPlusSettings,
)
from frontierflow.schemas.codecs import record_from_dict
from frontierflow.schemas.container import write_container
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent, FrontierEntry
from frontierflow.state.lafc_plus import LafcPlusParams
from frontierflow.state.relevance import Topic
from frontierflow.state.storage.rocksdb import RocksDBStore

TOPIC = "tcp:2,socket:1"
LOCAL = ["--runner=FnApiRunner"]
BUDGET = 45


def _strategy() -> LafcPlus:
    return LafcPlus(Topic.parse(TOPIC), LafcPlusSettings(LafcPlusParams(explore=0.2, depth=3)))


def _entry(line: str) -> FrontierEntry:
    return record_from_dict(FrontierEntry, json_to_record(line, "FrontierEntry"))


def _latest_per_change_key(lines: list[str]) -> dict[Any, dict[str, Any]]:
    latest: dict[Any, dict[str, Any]] = {}
    for line in lines:
        latest[change_key(_entry(line))] = json.loads(line)
    return latest


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[FetchEvent]]:
    """A simulated LAFC+ crawl of 3 cycles (100 pages, at most 45 downloads per cycle)
    written as the fetchers would have logged it, plus one invalid record."""
    tmp = tmp_path_factory.mktemp("lafc_plus")
    events: list[FetchEvent] = []
    simulate_cycles(
        random_web(100, 5), _strategy(), [0], BUDGET, 3, crawl_id="sim", on_event=events.append
    )
    records: list[dict[str, Any]] = [e.to_avro() for e in events]
    records.insert(len(records) // 2, {**records[0], "url": "ftp://not-http/"})
    write_container(tmp / "events.avro", "FetchEvent", records)
    return tmp, events


def test_recorded_crawl_has_cycles_answers_and_long_paths(
    crawl: tuple[Path, list[FetchEvent]],
) -> None:
    _, events = crawl
    assert {e.cycle for e in events} == {0, 1, 2}
    # the budget is used in every cycle: the random web has more than 45 reachable pages
    downloads = [sum(e.cycle == c and e.status == 200 for e in events) for c in range(3)]
    assert downloads == [BUDGET] * 3
    assert sum(e.status == ALREADY_FETCHED for e in events) > 0
    # some fetches carry a path of 3 pages, so their events send two credits
    assert any(e.echo.get(ECHO_PATH, "").count("\n") == 2 for e in events)


def _check(
    log_dir: Path, tmp: Path, events: list[FetchEvent], prefix: Path, beam_files: Callable[..., Any]
) -> None:
    out = tmp / "embedded.jsonl"
    stats = replay_log(
        log_dir / "events.avro",
        strategy_name="lafc-plus",
        state_dir=tmp / "state",
        out=out,
        step_size=7,
        strategy=_strategy(),
    )
    with RocksDBStore(tmp / "state", ("lafc-plus", "crawled")) as store:
        expected_states = {k.decode(): v for k, v in store.items("lafc-plus")}
    expected = _latest_per_change_key(out.read_text().splitlines())
    lines, states, dead = beam_files(prefix)
    latest = _latest_per_change_key(lines)
    assert len(latest) == len(lines)
    assert latest == expected
    assert states == expected_states
    answers = [e for e in events if e.status == ALREADY_FETCHED]
    assert stats.duplicates == len(answers) > 0
    assert all(e.via is not None and ECHO_ESTIMATE in e.echo for e in answers)
    # by hand: a state per downloaded page, nothing else (every credit goes to a page on
    # the path, which was downloaded)
    assert set(states) == {e.url for e in events if e.status != ALREADY_FETCHED}
    assert latest and all(isinstance(k, tuple) for k in latest)
    assert [json.loads(d)["error_class"] for d in dead] == ["InvalidEvent"]


def test_local_runner_equals_embedded(
    crawl: tuple[Path, list[FetchEvent]], tmp_path: Path, beam_files: Callable[..., Any]
) -> None:
    log_dir, events = crawl
    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    run_beam_replay(
        log_dir / "events.avro",
        strategy_name="lafc-plus",
        out_prefix=str(prefix),
        budget=BUDGET,
        beam_args=LOCAL,
        strategy=_strategy(),
    )
    _check(log_dir, tmp_path, events, prefix, beam_files)


@pytest.mark.parametrize("width_ms", [1, 1_000_000])
def test_unbounded_form_equals_embedded_for_any_window(
    crawl: tuple[Path, list[FetchEvent]],
    tmp_path: Path,
    width_ms: int,
    beam_files: Callable[..., Any],
) -> None:
    """W = 1: one event per window; W = 10^6: the whole crawl in one window."""
    log_dir, events = crawl
    prefix = tmp_path / "stream" / "out"
    prefix.parent.mkdir()
    run_beam_stream_replay(
        log_dir / "events.avro",
        strategy_name="lafc-plus",
        out_prefix=str(prefix),
        budget=BUDGET,
        windows=ClockWindows(width_ms),
        beam_args=LOCAL,
        strategy=_strategy(),
    )
    _check(log_dir, tmp_path, events, prefix, beam_files)
