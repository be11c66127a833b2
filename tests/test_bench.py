"""The benchmark command runs end to end on a small log and prints its figures and ratio
(speed targets are measured by the command itself, not asserted here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from frontierflow.pipelines.cli import main


def test_bench_prints_rates_and_ratio(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(
        [
            "bench",
            "--events",
            "200",
            "--urls",
            "3000",
            "--repeats",
            "1",
            "--step-size",
            "50",
            "--work-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert re.search(r"pass-through\s+[\d,]+\s+-", out)
    assert re.search(r"ieca\+rocksdb\s+[\d,]+\s+[\d,]+", out)
    assert re.search(r"ratio ieca / pass-through: \d+\.\d\d", out)
