"""`frontierflow replay` survives kill -9 anywhere: same output and state as one clean run.

A child process replays a log and SIGKILLs itself at a chosen point of the commit protocol
(after writing outputs, after flushing them, after committing the batch) in a chosen step;
the next run with the same state directory must finish with exactly the records and the
state of an uninterrupted run. The kill is real; only its timing is chosen. The killed run
commits every step, or every few steps (a commit interval: a kill then redoes the steps
since the last commit); the runs that finish use the replay's default interval.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crash_hook import CHILD_PRELUDE

from frontierflow.pipelines.cli import main
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.container import read_container, write_container
from frontierflow.state.storage.codec import decode_positions, decode_u64
from frontierflow.state.storage.format import INPUT_POSITION, OUTPUT_POSITION
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.store import META_FAMILY

STEP = 40
EVENTS = 600


def _write_log(
    path: Path, fetch_events: Callable[..., list[dict[str, Any]]], avro: bool = False
) -> None:
    """600 events over 900 pages of 37 hosts; as JSON lines with a broken line and an ftp:
    event (two dead letters), or as an Avro container of the valid events."""
    records = fetch_events(
        EVENTS,
        seed=7,
        pages=900,
        url="https://h{host}.example.org/page/{page}",
        hosts=37,
        max_outlinks=40,
        fetcher_ids=("f1",),
    )
    if avro:
        write_container(path, "FetchEvent", records)
        return
    lines = [json.dumps(r) for r in records]
    lines.insert(100, "{broken json")
    lines.insert(
        300,
        json.dumps(
            {
                "url": "ftp://nope/",
                "fetched_at": 1,
                "status": 200,
                "fetcher_id": "f",
                "host": "nope",
            }
        ),
    )
    path.write_text("\n".join(lines) + "\n")


def _replay_args(log: Path, state: Path, out: Path) -> list[str]:
    return [
        "replay",
        str(log),
        "--strategy",
        "ieca",
        "--state-dir",
        str(state),
        "--out",
        str(out),
        "--budget",
        "1000",
        "--step-size",
        str(STEP),
    ]


_CHILD = (
    CHILD_PRELUDE
    + """
import sys
from crash_hook import kill_at
from pathlib import Path
from frontierflow.pipelines.embedded.replay import replay_log
phase, nth = sys.argv[1], int(sys.argv[2])
hook = kill_at(phase, nth)
replay_log(Path(sys.argv[3]), strategy_name="ieca", state_dir=Path(sys.argv[4]),
           out=Path(sys.argv[5]), budget=1000, step_size=int(sys.argv[6]), before_commit=hook,
           commit_every=int(sys.argv[7]))
"""
)


def _killed_run(
    phase: str, nth: int, log: Path, state: Path, out: Path, commit_every: int = 1
) -> int:
    args = [phase, str(nth), str(log), str(state), str(out), str(STEP), str(commit_every)]
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        timeout=300,
    )
    return proc.returncode


def _state_dump(state_dir: Path) -> dict[str, dict[bytes, bytes]]:
    strategy = build_strategy("ieca", budget=1000)
    families = Engine.families_for(strategy)
    with RocksDBStore(state_dir, families) as store:
        return {f: dict(store.items(f)) for f in families}


def _records(out: Path) -> list[dict[str, object]]:
    if out.suffix == ".avro":
        return list(read_container(out))
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture
def reference(
    tmp_path: Path, fetch_events: Callable[..., list[dict[str, Any]]]
) -> tuple[Path, list[dict[str, object]], dict, bytes]:
    log = tmp_path / "events.jsonl"
    _write_log(log, fetch_events)
    out = tmp_path / "ref" / "frontier.avro"
    assert main(_replay_args(log, tmp_path / "ref-state", out)) == 0
    dead = out.with_name(out.name + ".dead-letters.jsonl").read_bytes()
    return log, _records(out), _state_dump(tmp_path / "ref-state"), dead


def test_reference_run_is_not_trivial(reference: tuple) -> None:
    _log, records, state, dead = reference
    assert len(records) > 1000
    assert len(state["ieca"]) > 800
    assert [json.loads(x)["error_class"] for x in dead.decode().splitlines()] == [
        "CodecError",
        "InvalidEvent",
    ]


_KILLS = [(1, phase, nth) for phase in ("flushing", "flushed", "committed") for nth in (1, 7)] + [
    (4, "flushing", 2),  # in the first interval: nothing committed yet
    (4, "flushed", 7),  # the 7th step's entries flushed, steps 5-7 not committed
    (4, "committed", 1),
    (4, "committed", 3),  # 12 of the 15 steps committed
]
"""(commit interval, phase, nth time the phase comes) of each kill: 15 steps of 40 events."""


@pytest.mark.parametrize(("commit_every", "phase", "nth"), _KILLS)
def test_kill_at_each_commit_phase(
    tmp_path: Path, reference: tuple, commit_every: int, phase: str, nth: int
) -> None:
    log, ref_records, ref_state, ref_dead = reference
    state, out = tmp_path / "state", tmp_path / "run" / "frontier.avro"
    assert _killed_run(phase, nth, log, state, out, commit_every) == -signal.SIGKILL
    assert main(_replay_args(log, state, out)) == 0
    assert _records(out) == ref_records
    assert _state_dump(state) == ref_state
    assert out.with_name(out.name + ".dead-letters.jsonl").read_bytes() == ref_dead


def test_a_kill_inside_a_commit_interval_leaves_the_last_commit(
    tmp_path: Path, reference: tuple
) -> None:
    """Killed after the 7th step flushed, with a commit every 4 steps: the store holds the
    4th step's commit (160 items of the log read), and the output file is longer than the
    committed output position (steps 5-7 were flushed; the next run cuts them and redoes)."""
    log = reference[0]
    state, out = tmp_path / "state", tmp_path / "run" / "frontier.avro"
    assert _killed_run("flushed", 7, log, state, out, commit_every=4) == -signal.SIGKILL
    strategy = build_strategy("ieca", budget=1000)
    with RocksDBStore(state, Engine.families_for(strategy)) as store:
        position = store.get(META_FAMILY, INPUT_POSITION)
        output = store.get(META_FAMILY, OUTPUT_POSITION)
    assert position is not None and decode_u64(position) == 4 * STEP
    assert output is not None and out.stat().st_size > decode_positions(output)[0]


def test_killed_again_and_again(tmp_path: Path, reference: tuple) -> None:
    """Five kills at random points in a row, each run resuming the previous one."""
    log, ref_records, ref_state, _ = reference
    state, out = tmp_path / "state", tmp_path / "run" / "frontier.avro"
    rng = random.Random(2024)
    for _ in range(5):
        phase = rng.choice(["flushing", "flushed", "committed"])
        assert _killed_run(phase, rng.randrange(1, 4), log, state, out) == -signal.SIGKILL
    assert main(_replay_args(log, state, out)) == 0
    assert _records(out) == ref_records
    assert _state_dump(state) == ref_state


def test_second_run_on_finished_state_changes_nothing(tmp_path: Path, reference: tuple) -> None:
    log, ref_records, ref_state, _ = reference
    state, out = tmp_path / "state", tmp_path / "frontier.avro"
    assert main(_replay_args(log, state, out)) == 0
    assert main(_replay_args(log, state, out)) == 0
    assert _records(out) == ref_records
    assert _state_dump(state) == ref_state


def test_jsonl_output_is_byte_identical_after_a_kill(
    tmp_path: Path, fetch_events: Callable[..., list[dict[str, Any]]]
) -> None:
    log = tmp_path / "events.avro"
    _write_log(log, fetch_events, avro=True)
    ref_out = tmp_path / "ref.jsonl"
    assert main(_replay_args(log, tmp_path / "ref-state", ref_out)) == 0
    state, out = tmp_path / "state", tmp_path / "run.jsonl"
    assert _killed_run("flushed", 4, log, state, out) == -signal.SIGKILL
    assert main(_replay_args(log, state, out)) == 0
    assert out.read_bytes() == ref_out.read_bytes()
    assert len(out.read_bytes().splitlines()) > 1000


def test_commit_every_on_the_command_line(tmp_path: Path, reference: tuple) -> None:
    """`--commit-every 3` gives the reference's records and state; 0 is refused."""
    log, ref_records, ref_state, _ = reference
    state, out = tmp_path / "state", tmp_path / "frontier.avro"
    assert main([*_replay_args(log, state, out), "--commit-every", "3"]) == 0
    assert _records(out) == ref_records
    assert _state_dump(state) == ref_state
    bad = [*_replay_args(log, tmp_path / "s2", tmp_path / "f2.avro"), "--commit-every", "0"]
    assert main(bad) == 2
