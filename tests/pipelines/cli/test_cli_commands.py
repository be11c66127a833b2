"""The command line's shape: the product commands first in `--help`, benchmarks and
simulations in groups with a default member, and the old command names (`bench-kafka`,
`simulate-speed`) still accepted with a note on stderr."""

from __future__ import annotations

import argparse
import csv
import gzip
import re
from pathlib import Path

import pytest

from frontierflow.pipelines.cli import bench, build_parser, main, renamed, simulate
from frontierflow.pipelines.cli.common import speed_settings
from frontierflow.pipelines.speed.settings import settings_for

COMMANDS = [
    "crawl",
    "run",
    "seed",
    "fetch",
    "replay",
    "warc-to-events",
    "urlfrontier",
    "crawl-report",
    "simulate",
    "bench",
    "shape-link",
]

OPTIONS = {
    "bench": {
        "kafka": ["--bootstrap-servers", "127.0.0.1:1"],
        "warc": ["crawl.warc"],
    },
    "simulate": {"speed": ["--out", "o"], "foragers": ["--out", "o"]},
}
"""Options each member requires, to parse it."""


def test_help_lists_the_product_commands_first_and_no_old_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per command
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if re.match(r"    \S", line)]
    assert listed == COMMANDS
    assert "usage: frontierflow [-h] [-v] COMMAND ..." in out
    for old in renamed.COMMANDS:
        assert old not in out


@pytest.mark.parametrize("old", sorted(renamed.COMMANDS))
def test_an_old_command_is_its_group_member(old: str) -> None:
    """`bench-kafka …` parses to what `bench kafka …` does, with the same options."""
    group, what = renamed.COMMANDS[old]
    options = OPTIONS.get(group, {}).get(what, [])
    parser = build_parser()
    before = vars(parser.parse_args([old, *options]))
    after = vars(parser.parse_args([group, what, *options]))
    assert before.pop("renamed") == (old, f"{group} {what}")
    assert after.pop("renamed") is None
    assert before.pop("command_line") == f"frontierflow {old}"
    assert after.pop("command_line") == f"frontierflow {group} {what}"
    assert after.pop("what") == what
    assert before.pop("command") == old and after.pop("command") == group
    # the group's own (default member's) options ride along on the new form only
    assert {k: v for k, v in after.items() if k in before} == before


def test_an_old_command_runs_with_a_deprecation_note(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert main(["bench-shard-state", "--sizes", "0"]) == 2  # refused: sizes >= 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "frontierflow: 'bench-shard-state' is deprecated, use 'bench shard-state'"
    ]
    assert "--sizes >= 1" in caplog.text


def test_new_commands_run_without_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "shard-state", "--sizes", "0"]) == 2
    assert "deprecated" not in capsys.readouterr().err


def test_bench_without_what_is_the_engine_bench() -> None:
    parser = build_parser()
    plain = parser.parse_args(["bench", "--events", "200", "--scale"])
    engine = parser.parse_args(["bench", "engine", "--events", "200", "--scale"])
    assert plain.handler is bench.bench and engine.handler is bench.bench
    assert (plain.events, plain.scale, plain.what) == (200, True, None)
    assert (engine.events, engine.scale, engine.what) == (200, True, "engine")


def test_simulate_without_what_crawls_a_graph() -> None:
    args = build_parser().parse_args(["simulate", "--graph", "g.tsv", "--out", "o"])
    assert args.handler is simulate.simulate
    assert (args.graph, args.out, args.what) == ("g.tsv", Path("o"), None)


def test_simulate_without_out_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    assert main(["simulate", "--graph", "g.tsv"]) == 2
    assert "simulate needs --out DIR" in caplog.text


def test_simulate_compares_ieca_plus_by_default(tmp_path: Path) -> None:
    edges = tmp_path / "g.tsv.gz"
    arcs = [(i, j) for i in range(40) for j in ((i + 1) % 40, (i * 5 + 3) % 40, 0)]
    with gzip.open(edges, "wt") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in arcs)
    out = tmp_path / "out"
    argv = ["simulate", "--graph", str(edges), "--stop-at", "0.5", "--points", "2"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    rows = csv.DictReader((out / "hot_pages.csv").open())
    assert {r["strategy"] for r in rows} == set(simulate.GRAPH_STRATEGIES)
    assert "ieca-plus" in simulate.GRAPH_STRATEGIES


def test_the_default_speed_controller_is_the_hypothesis_test(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = argparse.Namespace(speed_controller=None, speed_window_ms=2000)
    assert speed_settings(args) == settings_for("hypothesis", window_ms=2000)
    assert capsys.readouterr().err == ""
