"""Scheduled revisits give one schedule on every path: a crawl of the news site in simulated
time (the news-site fetcher of the fleet tests serving the frontier as a fetcher does), its
FetchEvents replayed by the embedded engine in steps of another size, by the bounded Beam
replay and by the unbounded Beam form (clock windows of a minute), end with the same revisit
entries (`not_before` and all), the same revisit records per page and per host (the
unbounded form keeps its own in Beam state) and the same strategy states."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from news_recording import crawl_news, latest_entries

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.replay import run_beam_replay
from frontierflow.pipelines.beam.stream_replay import run_beam_stream_replay
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import REVISIT_ECHO
from frontierflow.state.revisit_schedule import REVISITS_FAMILY, parse_revisit
from frontierflow.state.storage.rocksdb import RocksDBStore

LOCAL = ["--runner=FnApiRunner"]
CLI_BEAM = ["--beam-option=--runner=FnApiRunner", "--speed-controller", "none"]


def _frontier(prefix: Path) -> dict[str, dict[str, Any]]:
    """The latest entry per URL in a Beam replay's frontier files."""
    entries: dict[str, dict[str, Any]] = {}
    for f in prefix.parent.glob(f"{prefix.name}-frontier*"):
        entries.update(latest_entries(f))
    return entries


def _states(prefix: Path) -> dict[str, bytes]:
    """The encoded state per URL in a Beam replay's state files."""
    states = {}
    for f in prefix.parent.glob(f"{prefix.name}-state*"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            states[row["url"]] = base64.b64decode(row["state"])
    return states


@pytest.mark.parametrize("policy", ["fixed:20m", "learned:20s"])
def test_the_news_crawls_revisits_are_the_same_on_replay_and_on_beam(
    tmp_path: Path, policy: str
) -> None:
    revisit = parse_revisit(policy)
    crawl = crawl_news(tmp_path, policy, budget=1000, days=0.25)
    revisits = [e for e in crawl.events if REVISIT_ECHO in e.echo]
    assert len(crawl.events) > 150 and len(revisits) > 100
    log = tmp_path / "events.avro"
    write_container(log, "FetchEvent", [e.to_avro() for e in crawl.events])
    live = {k: v for k, v in crawl.store.items(REVISITS_FAMILY)}
    assert len(live) == len({e.url for e in crawl.events}) + 1  # the pages and their host

    out = tmp_path / "embedded.jsonl"
    replay_log(
        log, strategy_name="bfs", state_dir=tmp_path / "state", out=out, budget=1000,
        step_size=37, revisit=revisit,
    )  # fmt: skip
    with RocksDBStore(tmp_path / "state", ("bfs", "crawled", REVISITS_FAMILY)) as store:
        replayed = {k: v for k, v in store.items(REVISITS_FAMILY)}
        states = {k.decode(): v for k, v in store.items("bfs")}
    assert replayed == live  # the closed loop's schedule, in steps of 37 events
    expected = latest_entries(out)
    # each page is due again; with learned revisits a story (it says when it was published)
    # is not: no revisit entry is its latest
    stories = {e.url for e in crawl.events if e.published_at is not None}
    hubs = {e.url for e in crawl.events} - stories
    assert hubs and all(expected[u]["not_before"] for u in hubs)
    if policy.startswith("learned"):
        assert stories and not any(expected.get(u, {}).get("not_before") for u in stories)
    else:
        assert all(expected[u]["not_before"] for u in stories)

    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    run_beam_replay(
        log, strategy_name="bfs", out_prefix=str(prefix), budget=1000, beam_args=LOCAL,
        revisit=revisit,
    )  # fmt: skip
    entries = _frontier(prefix)
    beam_revisits = {}
    for f in prefix.parent.glob("out-revisits*"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            beam_revisits[row["key"].encode()] = base64.b64decode(row["state"])
    beam_states = _states(prefix)
    # the replay's file holds upserts only: a story whose entry a revisit's links wrote
    # and that was fetched after it keeps that entry there; Beam's frontier has it removed
    fetched_at = {e.url: e.fetched_at for e in crawl.events}
    removed = expected.keys() - entries.keys()
    assert all(u in stories and fetched_at[u] > expected[u]["emitted_at"] for u in removed)
    assert entries == {u: e for u, e in expected.items() if u not in removed}
    assert beam_revisits == live
    assert beam_states == states

    # the unbounded form, a minute of fetches a clock window: the same entries and states
    stream = tmp_path / "stream" / "out"
    stream.parent.mkdir()
    run_beam_stream_replay(
        str(log), strategy_name="bfs", out_prefix=str(stream), budget=1000,
        windows=ClockWindows(60_000), beam_args=LOCAL, revisit=revisit,
    )  # fmt: skip
    assert _frontier(stream) == entries
    assert _states(stream) == states


def test_replay_takes_revisit_on_the_engine_and_both_beam_forms(tmp_path: Path) -> None:
    crawl = crawl_news(tmp_path, "fixed:20m", budget=100, days=0.05)
    log = tmp_path / "events.avro"
    write_container(log, "FetchEvent", [e.to_avro() for e in crawl.events])
    base = ["replay", str(log), "--strategy", "bfs", "--budget", "100", "--revisit", "fixed:20m"]
    embedded = tmp_path / "embedded.jsonl"
    assert main([*base, "--state-dir", str(tmp_path / "s"), "--out", str(embedded)]) == 0
    beam = tmp_path / "beam" / "out"
    beam.parent.mkdir()
    assert main([*base, "--runner", "beam", "--out", str(beam), *CLI_BEAM]) == 0
    entries: dict[str, dict[str, Any]] = {}
    for f in beam.parent.glob("out-frontier*"):
        entries.update(latest_entries(f))
    expected = latest_entries(embedded)
    assert entries == expected
    due = {e.url: e.fetched_at + 20 * 60_000 for e in crawl.events}  # the last download's
    assert {u: e["not_before"] for u, e in expected.items() if u in due} == due
    stream = tmp_path / "stream" / "out"
    stream.parent.mkdir()
    windowed = [*base, "--runner", "beam", "--clock", "windowed:60000", "--out", str(stream)]
    assert main([*windowed, *CLI_BEAM]) == 0
    assert _frontier(stream) == expected  # the unbounded form, a minute a window
