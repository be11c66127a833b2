"""LAFC on Beam equals LAFC in the embedded engine on a recorded multi-cycle crawl.

LAFC learns from repeated fetches (a status-208 answer still reinforces the parent with
`fresh=False`) and emits tuples of changes keyed per (url, via): the bounded pipeline on the
local runner and on Prism, and the unbounded form for any clock window W (LAFC never reads
the crawl clock), must leave the engine's final state and latest entry per change key."""

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
from frontierflow.pipelines.strategies.lafc import ECHO_PUSH, Lafc, LafcSettings
from frontierflow.schemas.codecs import record_from_dict
from frontierflow.schemas.container import write_container
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent, FrontierEntry
from frontierflow.state.relevance import Topic
from frontierflow.state.storage.rocksdb import RocksDBStore

TOPIC = "tcp:2,socket:1"
LOCAL = ["--runner=FnApiRunner"]


def _strategy() -> Lafc:
    return Lafc(Topic.parse(TOPIC), LafcSettings(control_threshold=0.3, seed=3))


def _recorded_crawl(log: Path, pages: int, budget: int, cycles: int = 3) -> list[FetchEvent]:
    """A simulated LAFC crawl of `cycles` cycles written as the fetchers would have logged
    it, plus one invalid record (a dead letter) in the middle."""
    events: list[FetchEvent] = []
    simulate_cycles(
        random_web(pages, 5),
        _strategy(),
        [0],
        budget,
        cycles,
        crawl_id="sim",
        on_event=events.append,
    )
    records: list[dict[str, Any]] = [e.to_avro() for e in events]
    records.insert(len(records) // 2, {**records[0], "url": "ftp://not-http/"})
    write_container(log, "FetchEvent", records)
    return events


def _entry(line: str) -> FrontierEntry:
    return record_from_dict(FrontierEntry, json_to_record(line, "FrontierEntry"))


def _latest_per_change_key(lines: list[str]) -> dict[Any, dict[str, Any]]:
    """Entry lines in output order → the latest entry per `change_key`."""
    latest: dict[Any, dict[str, Any]] = {}
    for line in lines:
        latest[change_key(_entry(line))] = json.loads(line)
    return latest


def _embedded(log: Path, tmp: Path) -> tuple[dict[Any, dict[str, Any]], dict[str, bytes], int]:
    """(latest entry per change key, states, repeat fetches) of the embedded engine."""
    out = tmp / "embedded.jsonl"
    stats = replay_log(
        log,
        strategy_name="lafc",
        state_dir=tmp / "state",
        out=out,
        step_size=7,
        strategy=_strategy(),
    )
    with RocksDBStore(tmp / "state", ("lafc", "crawled")) as store:
        states = {k.decode(): v for k, v in store.items("lafc")}
    return _latest_per_change_key(out.read_text().splitlines()), states, stats.duplicates


def _check(
    log: Path, tmp: Path, events: list[FetchEvent], prefix: Path, beam_files: Callable[..., Any]
) -> None:
    """The Beam output under `prefix` equals the embedded engine's replay of `log` (its
    state directory under `tmp`)."""
    expected, expected_states, duplicates = _embedded(log, tmp)
    lines, states, dead = beam_files(prefix)
    latest = _latest_per_change_key(lines)
    # Beam writes one line per change key (its latest), so no key appears twice
    assert len(latest) == len(lines)
    assert latest == expected
    assert states == expected_states
    # by hand: the simulator answers with 208 exactly the pages already downloaded in the
    # cycle, i.e. the engine's repeat fetches; each came from a parent's reply request
    answers = [e for e in events if e.status == ALREADY_FETCHED]
    assert duplicates == len(answers) > 0
    assert all(e.via is not None and ECHO_PUSH in e.echo for e in answers)
    # by hand: an automaton per downloaded page, nothing else (parents were downloaded)
    assert set(states) == {e.url for e in events if e.status != ALREADY_FETCHED}
    # by hand: the log has no seed messages, so every entry is a sampled action: a reply
    # request, kept per (url, via)
    assert latest and all(isinstance(k, tuple) for k in latest)
    assert [json.loads(d)["error_class"] for d in dead] == ["InvalidEvent"]


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[FetchEvent]]:
    """A 3-cycle crawl of 100 pages, at most 45 downloads per cycle."""
    tmp = tmp_path_factory.mktemp("lafc")
    events = _recorded_crawl(tmp / "events.avro", pages=100, budget=45)
    return tmp, events


def test_recorded_crawl_has_cycles_and_answers(crawl: tuple[Path, list[FetchEvent]]) -> None:
    _, events = crawl
    assert {e.cycle for e in events} == {0, 1, 2}
    # by hand: 45 downloads per cycle unless the frontier empties first
    downloads = [sum(e.cycle == c and e.status == 200 for e in events) for c in range(3)]
    assert all(0 < d <= 45 for d in downloads)
    assert sum(e.status == ALREADY_FETCHED for e in events) > 0


def test_local_runner_equals_embedded(
    crawl: tuple[Path, list[FetchEvent]], tmp_path: Path, beam_files: Callable[..., Any]
) -> None:
    log_dir, events = crawl
    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    run_beam_replay(
        log_dir / "events.avro",
        strategy_name="lafc",
        out_prefix=str(prefix),
        budget=45,
        beam_args=LOCAL,
        strategy=_strategy(),
    )
    _check(log_dir / "events.avro", tmp_path, events, prefix, beam_files)


@pytest.mark.parametrize("width_ms", [1, 7, 1_000_000])
def test_unbounded_form_equals_embedded_for_any_window(
    crawl: tuple[Path, list[FetchEvent]],
    tmp_path: Path,
    width_ms: int,
    beam_files: Callable[..., Any],
) -> None:
    """W = 1: one event per window (fetched_at advances 1 ms per answer); W = 7: several;
    W = 10^6: the whole crawl in one window. LAFC reads no clock: all equal the engine."""
    log_dir, events = crawl
    prefix = tmp_path / "stream" / "out"
    prefix.parent.mkdir()
    run_beam_stream_replay(
        log_dir / "events.avro",
        strategy_name="lafc",
        out_prefix=str(prefix),
        budget=45,
        windows=ClockWindows(width_ms),
        beam_args=LOCAL,
        strategy=_strategy(),
    )
    _check(log_dir / "events.avro", tmp_path, events, prefix, beam_files)


@pytest.mark.beam_runner
def test_prism_equals_embedded(
    tmp_path: Path, prism_binary: Path, beam_files: Callable[..., Any]
) -> None:
    events = _recorded_crawl(tmp_path / "events.avro", pages=40, budget=15)
    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    run_beam_replay(
        tmp_path / "events.avro",
        strategy_name="lafc",
        out_prefix=str(prefix),
        budget=15,
        beam_args=[
            "--runner=PrismRunner",
            f"--prism_location={prism_binary}",
            "--environment_type=LOOPBACK",
        ],
        strategy=_strategy(),
    )
    _check(tmp_path / "events.avro", tmp_path, events, prefix, beam_files)
