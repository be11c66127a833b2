"""`frontierflow bench foragers` on the synthetic news recording: it prints its table and
finds the engine's walk equal to the direct simulation's."""

from __future__ import annotations

from pathlib import Path

import pytest
from news_recording import write_recording

from frontierflow.pipelines.cli import main


def test_bench_foragers_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_recording(tmp_path)
    assert (
        main(
            ["bench", "foragers", "--news", str(tmp_path), "--days", "0.05", "--variants", "wl,rl"]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = [
        line for line in out.splitlines() if line.startswith("| wl ") or line.startswith("| rl ")
    ]
    assert len(rows) == 2 and all("| yes |" in row for row in rows)
