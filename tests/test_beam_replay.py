"""The Beam replay pipeline equals the embedded engine: same latest frontier entry per URL,
same final state, on the local runner, on Prism and on Flink (embedded, LOOPBACK)."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

from frontierflow.pipelines.beam import replay as beam_replay
from frontierflow.pipelines.beam.replay import run_beam_replay
from frontierflow.pipelines.beam.speed import read_beam_decisions
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.core.step import is_repeat_fetch
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.schemas.container import write_container
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import ScalingDecision
from frontierflow.state.rocksdb import RocksDBStore

BUDGET = 120  # k = 3: IECA's clock steps every 3 pages, so any clock error shows


def _log(path: Path, events: int = 300) -> list[dict[str, Any]]:
    rng = random.Random(17)
    urls = [f"https://h{i % 29}.example.com/p/{i}" for i in range(500)]
    records = []
    for i in range(events):
        url = urls[rng.randrange(len(urls))]  # some pages fetched twice: repeats
        records.append(
            {
                "url": url,
                "fetched_at": 1_700_000_000_000 + i,
                "status": 200,
                "fetcher_id": "f",
                "host": url.split("/")[2],
                "crawl_id": "c",
                "cycle": rng.choice([0, 0, 0, 1]),
                "outlinks": [*rng.sample(urls, rng.randrange(0, 30)), "mailto:x@y.z"],
                "echo": {"ieca.d": repr(rng.uniform(-0.5, 3.0))} if i % 3 else {},
            }
        )
    records.insert(50, {**records[0], "url": "ftp://not-http/"})  # a dead letter
    write_container(path, "FetchEvent", records)
    return records


def _embedded(log: Path, tmp: Path, strategy: str) -> tuple[dict, dict]:
    out = tmp / "embedded.jsonl"
    replay_log(
        log, strategy_name=strategy, state_dir=tmp / "state", out=out, budget=BUDGET, step_size=37
    )
    latest = {}
    for line in out.read_text().splitlines():
        entry = json.loads(line)
        latest[entry["url"]] = entry
    with RocksDBStore(tmp / "state", (strategy, "crawled")) as store:
        states = {k.decode(): v for k, v in store.items(strategy)}
    return latest, states


def beam_files(prefix: Path) -> tuple[list[str], dict[str, bytes], list[str]]:
    """What a Beam replay wrote under `prefix`: frontier lines, state per URL, dead letters."""
    lines: list[str] = []
    states: dict[str, bytes] = {}
    dead: list[str] = []
    for f in prefix.parent.glob(prefix.name + "-frontier*"):
        lines += f.read_text().splitlines()
    for f in prefix.parent.glob(prefix.name + "-state*"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            states[row["url"]] = base64.b64decode(row["state"])
    for f in prefix.parent.glob(prefix.name + "-dead-letters*"):
        dead += f.read_text().splitlines()
    return lines, states, dead


def _beam(prefix: Path) -> tuple[dict, dict, list[str]]:
    lines, states, dead = beam_files(prefix)
    entries = {}
    for line in lines:
        entry = json.loads(line)
        entries[entry["url"]] = entry
    return entries, states, dead


def _check_equal(tmp: Path, strategy: str, beam_args: list[str]) -> None:
    log = tmp / "events.avro"
    records = _log(log)
    expected, expected_states = _embedded(log, tmp, strategy)
    prefix = tmp / "beam" / "out"
    prefix.parent.mkdir()
    run_beam_replay(
        log, strategy_name=strategy, out_prefix=str(prefix), budget=BUDGET, beam_args=beam_args
    )
    entries, states, dead = _beam(prefix)
    # the embedded file holds every upsert; a URL fetched after its last entry has a
    # tombstone in Kafka and no entry from Beam: compare the URLs that are still waiting
    last_fetch: dict[str, int] = {}
    last_cycle: dict[str, int] = {}
    for r in records:  # fetches that took effect: repeats in a cycle do not
        if not is_repeat_fetch(last_cycle.get(r["url"]), r["cycle"]):
            last_cycle[r["url"]] = r["cycle"]
            last_fetch[r["url"]] = r["fetched_at"]
    waiting = {u: e for u, e in expected.items() if e["emitted_at"] > last_fetch.get(u, -1)}
    assert entries == waiting
    assert states == expected_states
    assert len(states) > 400 and len(entries) > 100
    assert [json.loads(d)["error_class"] for d in dead] == ["InvalidEvent"]
    assert len(records) == 301


@pytest.mark.parametrize("strategy", ["ieca", "bfs", "opic"])
def test_local_runner_equals_embedded(tmp_path: Path, strategy: str) -> None:
    _check_equal(tmp_path, strategy, ["--runner=FnApiRunner"])


def test_clock_over_many_buckets_equals_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Buckets of 7 positions: 301 records make 43 buckets, so every event's clock is the
    prefix sum of earlier buckets plus its rank in its own (IECA's clock steps every 3
    pages, so one page off anywhere shows in the distances)."""
    monkeypatch.setattr(beam_replay, "CLOCK_BUCKET", 7)
    _check_equal(tmp_path, "ieca", ["--runner=FnApiRunner"])


def test_pages_before_buckets_by_hand() -> None:
    counts = {("a", 0): 3, ("a", 2): 4, ("b", 1): 5, ("a", 5): 1}
    assert beam_replay.pages_before_buckets(counts) == {
        ("a", 0): 0,
        ("a", 2): 3,
        ("a", 5): 7,
        ("b", 1): 0,
    }


@pytest.mark.beam_runner
def test_prism_equals_embedded(tmp_path: Path, prism_binary: Path) -> None:
    _check_equal(
        tmp_path,
        "ieca",
        ["--runner=PrismRunner", f"--prism_location={prism_binary}", "--environment_type=LOOPBACK"],
    )


@pytest.mark.beam_runner
def test_flink_equals_embedded(
    tmp_path: Path, flink_job_server_jar: Path, flink_conf_dir: Path
) -> None:
    _check_equal(
        tmp_path,
        "ieca",
        [
            "--runner=FlinkRunner",
            "--flink_master=[local]",
            "--flink_version=1.19",
            f"--flink_job_server_jar={flink_job_server_jar}",
            f"--flink_conf_dir={flink_conf_dir}",
            "--environment_type=LOOPBACK",
            "--parallelism=2",
        ],
    )


def test_cli_replay_with_beam(tmp_path: Path) -> None:
    """The frontier and, with it, the speed controller's Beam form: the same decisions as
    the embedded replay (fetched_at takes 60 values, base + 0…59 ms: windows of 10 ms give 6)."""
    log = tmp_path / "events.avro"
    _log(log, events=60)
    out = tmp_path / "beam-out"
    speed = ["--speed-window-ms", "10"]
    code = main(
        [
            "replay",
            str(log),
            "--runner",
            "beam",
            "--state-dir",
            str(tmp_path / "s"),
            "--out",
            str(out),
            "--budget",
            str(BUDGET),
            "--beam-option=--runner=FnApiRunner",
            *speed,
        ]
    )
    assert code == 0
    entries, states, _ = _beam(out)
    assert entries and states
    embedded = tmp_path / "embedded.jsonl"
    args = ["replay", str(log), "--state-dir", str(tmp_path / "e"), "--out", str(embedded)]
    assert main([*args, "--budget", str(BUDGET), *speed]) == 0
    expected = [
        ScalingDecision(**json_to_record(line, "ScalingDecision"))
        for line in (tmp_path / "embedded.jsonl.decisions.jsonl").read_text().splitlines()
    ]
    assert [(d.window_start, d.window_end) for d in expected] == [
        (1_700_000_000_000 + 10 * k, 1_700_000_000_010 + 10 * k) for k in range(6)
    ]
    assert read_beam_decisions(f"{out}-speed") == expected


def test_pagerank_is_refused_on_beam(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="global recomputation"):
        run_beam_replay(tmp_path / "x.avro", strategy_name="pagerank", out_prefix="x", budget=10)
