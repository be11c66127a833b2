"""`frontierflow urlfrontier` and `bench urlfrontier` from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontierflow.pipelines.cli import main


def test_bench_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "urlfrontier", "--pages", "20", "--outlinks", "3", "--serve", "10"]) == 0
    out = capsys.readouterr().out.splitlines()
    # 20 seeds + 20 pages × (3 outlinks + 1 report)
    assert out[0].startswith("PutURLs: 100 items (20 page reports")
    assert out[1].startswith("GetURLs: ") and "URLs/s" in out[1]


def test_kafka_mode_refuses_a_strategy_whose_seeds_need_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    args = ["urlfrontier", "--state-dir", str(tmp_path), "--bootstrap-servers", "127.0.0.1:1"]
    assert main([*args, "--strategy", "best-first", "--topic", "sockets"]) == 2
    assert "with Kafka only ieca, bfs, opic, backlink, random" in caplog.text
