"""The forager fleet replayed: the embedded engine, Beam's bounded replay and a replay
killed with SIGKILL again and again all leave the fleet the closed loop left.

The log is a recorded closed-loop run of WL+RL foragers over the synthetic news site
(`run_fleet_on_engine`), with one invalid record; the replays inject the same seeds at
the same time before it."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from crash_hook import CHILD_PRELUDE
from news_recording import write_recording

from frontierflow.pipelines.beam.replay import Seeds, run_beam_replay
from frontierflow.pipelines.core.strategy import change_key
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.evaluation.forager_engine import fleet_strategy, run_fleet_on_engine
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site
from frontierflow.schemas.codecs import record_from_dict
from frontierflow.schemas.container import write_container
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.fleet import decode_fleet_state, fleet_key
from frontierflow.state.forager import Variant
from frontierflow.state.storage.rocksdb import RocksDBStore

START = "2022-03-01T06:00:00Z"
DAYS = 0.12
SEED = 3
KEY = fleet_key("news")


def setup_for(news: Path) -> ForagerSetup:
    return ForagerSetup(news=news, start=START, days=DAYS, topic=("Europe",))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("foragers")
    write_recording(tmp)
    setup = setup_for(tmp)
    site = build_site(setup)
    events: list[FetchEvent] = []
    run = run_fleet_on_engine(site, setup, Variant.WLRL, SEED, on_event=events.append)
    records = [e.to_avro() for e in events]
    records.insert(len(records) // 2, {**records[0], "url": "ftp://not-http/"})
    write_container(tmp / "events.avro", "FetchEvent", records)
    seeds = Seeds(site.seeds(setup.params.start_list), "news", site.start_ms)
    return {
        "dir": tmp,
        "run": run,
        "seeds": seeds,
        "strategy": fleet_strategy(site, setup, Variant.WLRL, SEED),
    }


def _engine_replay(recorded: dict[str, Any], state_dir: Path, out: Path) -> None:
    seeds: Seeds = recorded["seeds"]
    replay_log(
        recorded["dir"] / "events.avro",
        strategy_name="forager-wlrl",
        strategy=recorded["strategy"],
        state_dir=state_dir,
        out=out,
        step_size=37,
        seeds=seeds.urls,
        crawl_id=seeds.crawl_id,
        seed_ms=seeds.at_ms,
    )


def _fleet_state(state_dir: Path) -> bytes:
    with RocksDBStore(state_dir, ("fleet", "crawled")) as store:
        raw = store.get("fleet", KEY.encode())
    assert raw is not None
    return raw


def _latest(lines: list[str]) -> dict[Any, str]:
    latest: dict[Any, str] = {}
    for line in lines:
        row = json.loads(line)
        if "priority" not in row:
            latest[row["url"]] = line
            continue
        entry = record_from_dict(FrontierEntry, json_to_record(line, "FrontierEntry"))
        latest[change_key(entry)] = line
    return latest


def test_the_recorded_run_has_steps_sends_and_turns(recorded: dict[str, Any]) -> None:
    run = recorded["run"]
    state = decode_fleet_state(run.state)
    assert run.events > 500 and run.counters.sent > 10 and run.counters.relevant > 0
    assert state.step.number > 20 and run.counters.stale == 0


def test_engine_replay_repeats_the_closed_loop_and_beam_equals_it(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    _engine_replay(recorded, tmp_path / "state", tmp_path / "engine.jsonl")
    assert _fleet_state(tmp_path / "state") == recorded["run"].state
    dead = (tmp_path / "engine.jsonl.dead-letters.jsonl").read_text().splitlines()
    assert [json.loads(d)["error_class"] for d in dead] == ["InvalidEvent"]
    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    run_beam_replay(
        recorded["dir"] / "events.avro",
        strategy_name="forager-wlrl",
        strategy=recorded["strategy"],
        out_prefix=str(prefix),
        budget=1_000_000,
        beam_args=["--runner=FnApiRunner"],
        seeds=recorded["seeds"],
    )
    states: dict[str, bytes] = {}
    lines: list[str] = []
    beam_dead: list[str] = []
    for f in prefix.parent.glob("out-state*"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            states[row["url"]] = base64.b64decode(row["state"])
    for f in prefix.parent.glob("out-frontier*"):
        lines += f.read_text().splitlines()
    for f in prefix.parent.glob("out-dead-letters*"):
        beam_dead += f.read_text().splitlines()
    assert states == {KEY: recorded["run"].state}
    engine_lines = (tmp_path / "engine.jsonl").read_text().splitlines()
    expected = {k: json.loads(v) for k, v in _latest(engine_lines).items()}
    got = {k: json.loads(v) for k, v in _latest(lines).items()}
    for row in (*expected.values(), *got.values()):
        row.pop("emitted_at", None)
    # files hold upserts only: a path's first page, removed once answered, keeps its last
    # upsert in the engine's file of every step and has none in Beam's file of the last
    # change per key; every other latest entry is equal
    assert {k: v for k, v in expected.items() if k in got} == got and len(got) > 20
    assert all(isinstance(k, str) for k in expected.keys() - got.keys())
    assert len(beam_dead) == 1


_CHILD = (
    CHILD_PRELUDE
    + """
import sys
from crash_hook import kill_at
from pathlib import Path
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.evaluation.forager_engine import fleet_strategy
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site
from frontierflow.state.forager import Variant
phase, nth, news, state, out, start, days, seed = sys.argv[1:]
news = Path(news)
setup = ForagerSetup(news=news, start=start, days=float(days), topic=("Europe",))
site = build_site(setup)
hook = kill_at(phase, int(nth))
replay_log(news / "events.avro", strategy_name="forager-wlrl",
           strategy=fleet_strategy(site, setup, Variant.WLRL, int(seed)),
           state_dir=Path(state), out=Path(out), step_size=37, before_commit=hook,
           seeds=site.seeds(setup.params.start_list), crawl_id="news", seed_ms=site.start_ms)
"""
)


def test_killed_again_and_again_the_fleet_ends_as_in_one_run(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    reference = tmp_path / "ref.jsonl"
    _engine_replay(recorded, tmp_path / "ref-state", reference)
    state, out = tmp_path / "state", tmp_path / "run.jsonl"
    kills = [("committed", 1), ("flushing", 3), ("flushed", 2), ("committed", 4)]
    for phase, nth in kills:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _CHILD,
                phase,
                str(nth),
                str(recorded["dir"]),
                str(state),
                str(out),
                START,
                str(DAYS),
                str(SEED),
            ],
            capture_output=True,
            timeout=300,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    _engine_replay(recorded, state, out)
    assert _fleet_state(state) == recorded["run"].state
    assert out.read_bytes() == reference.read_bytes()


def test_the_replay_command_takes_seeds_on_both_engines(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    """`frontierflow replay --strategy forager-wlrl --sections … --seed-url …`, embedded and
    `--runner beam`: the same fleet. (The command's x has no corpus idf, so its fleet may
    choose differently from the recorded run, whose answers it then counts as stale: the
    point here is that both engines agree.)"""
    from frontierflow.pipelines.cli import main

    seeds: Seeds = recorded["seeds"]
    common = [
        str(recorded["dir"] / "events.avro"),
        "--strategy", "forager-wlrl", "--sections", "Europe", "--seed", str(SEED),
        "--seed-crawl-id", "news", "--seed-time-ms", str(seeds.at_ms),
        *(f"--seed-url={u}" for u in seeds.urls),
    ]  # fmt: skip
    assert (
        main(
            [
                "replay",
                *common,
                "--state-dir",
                str(tmp_path / "s"),
                "--out",
                str(tmp_path / "e.jsonl"),
            ]
        )
        == 0
    )
    prefix = tmp_path / "beam" / "out"
    prefix.parent.mkdir()
    beam = ["--runner", "beam", "--beam-option=--runner=FnApiRunner", "--speed-controller", "none"]
    assert main(["replay", *common, *beam, "--out", str(prefix)]) == 0
    [state_file] = list(prefix.parent.glob("out-state*"))
    [row] = [json.loads(line) for line in state_file.read_text().splitlines()]
    engine_state = _fleet_state(tmp_path / "s")
    assert row["url"] == KEY and base64.b64decode(row["state"]) == engine_state
    fleet = decode_fleet_state(engine_state)
    assert fleet.counters.downloads > 0 and fleet.foragers
