"""The Beam replay pipeline equals the embedded engine: same latest frontier entry per URL,
same final state, on the local runner, on Prism and on Flink (embedded, LOOPBACK)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from apache_beam.coders import FastPrimitivesCoder

from frontierflow.pipelines.beam.replay import run_beam_replay
from frontierflow.pipelines.beam.shard_blocks import message_of, message_tuple
from frontierflow.pipelines.beam.speed import read_beam_decisions
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.core.strategy import Link, PageSeen, Reinforce
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import ScalingDecision


@pytest.mark.parametrize("strategy", ["ieca", "bfs", "opic"])
def test_local_runner_equals_embedded(beam_replay_case: Any, tmp_path: Path, strategy: str) -> None:
    beam_replay_case.check_equal(tmp_path, strategy, ["--runner=FnApiRunner"])


@pytest.mark.beam_runner
def test_prism_equals_embedded(beam_replay_case: Any, tmp_path: Path, prism_binary: Path) -> None:
    beam_replay_case.check_equal(
        tmp_path,
        "ieca",
        ["--runner=PrismRunner", f"--prism_location={prism_binary}", "--environment_type=LOOPBACK"],
    )


@pytest.mark.slow
@pytest.mark.beam_runner
def test_flink_equals_embedded(
    beam_replay_case: Any, tmp_path: Path, flink_job_server_jar: Path, flink_conf_dir: Path
) -> None:
    beam_replay_case.check_equal(
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


def test_cli_replay_with_beam(beam_replay_case: Any, tmp_path: Path) -> None:
    """The frontier and, with it, the speed controller's Beam form: the same decisions as
    the embedded replay (fetched_at takes 60 values, base + 0…59 ms: windows of 10 ms give 6)."""
    log = tmp_path / "events.avro"
    beam_replay_case.write_log(log, events=60)
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
            str(beam_replay_case.budget),
            "--beam-option=--runner=FnApiRunner",
            *speed,
        ]
    )
    assert code == 0
    entries, states, _ = beam_replay_case.beam(out)
    assert entries and states
    embedded = tmp_path / "embedded.jsonl"
    args = ["replay", str(log), "--state-dir", str(tmp_path / "e"), "--out", str(embedded)]
    assert main([*args, "--budget", str(beam_replay_case.budget), *speed]) == 0
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


def test_messages_cross_a_shuffle_as_tuples_and_come_back_whole() -> None:
    """A message as the routed tuple, through the coder of a shuffle (tuple fields may come
    back as lists), is the same message again, of its own type; a tuple that lost a field
    is refused, not read with the field's default."""
    coder = FastPrimitivesCoder()
    messages = [
        Link("https://c/", "https://p/", "crawl", 2, 0.5, 0.25),
        Reinforce("https://p/", "https://c/", "crawl", 1, 0.75, False, True),
        PageSeen("https://u/", "crawl", 0, 200, ("https://a/",), (0.5, 0.25), -1, True, 3, 4),
    ]
    for message in messages:
        back = message_of(coder.decode(coder.encode(message_tuple(message))))
        assert back == message and type(back) is type(message)
    with pytest.raises(TypeError):
        message_of(message_tuple(messages[0])[:-1])
