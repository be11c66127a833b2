"""`bench shard-state`: one small shard measured through the CLI (the figures themselves are
for docs/RESULTS.md, not asserted)."""

from __future__ import annotations

import pytest

from frontierflow.pipelines.bench.shard_state import shard_costs
from frontierflow.pipelines.cli import main


def test_the_window_appends_what_it_changed_and_the_whole_cell_holds_the_shard() -> None:
    costs = shard_costs(2_000, changes=100, repeats=1)
    # an append carries 100 records; the whole cell 2,050: the 2,000 and 50 new URLs
    assert costs["whole_kb"] > 15 * costs["append_kb"] > 0


def test_cli_prints_one_row_per_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "shard-state", "--sizes", "500,1000", "--repeats", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in rows[2:4]] == ["500", "1,000"]


def test_cli_refuses_an_empty_shard() -> None:
    assert main(["bench", "shard-state", "--sizes", "0"]) == 2
