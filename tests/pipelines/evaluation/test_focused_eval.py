"""Akbari Torkestani 2012's evaluation: precision (eq. 20), recall (eq. 21) over the pooled
relevant set, the paired t-test of Table 4, and a reduced run of `frontierflow simulate
--web` on real Debian manuals (fetched by infra/debian-docs/fetch.sh)."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
from topical_webs import Web

from frontierflow.pipelines.cli import main
from frontierflow.pipelines.evaluation.focused import (
    Curve,
    FocusedSetup,
    TopicResult,
    compute_table,
    default_seeds,
    evaluate_topic,
    paired_t_test,
    reachable,
    t_test_table,
)
from frontierflow.state.relevance import Judge, Topic

ROOT = Path(__file__).resolve().parents[3]


ON, OFF = {"net": 1}, {"zzz": 1}


def _chain() -> Web:
    # index → 1 → 2 → 3 → 4, and index → 5 (a dead end). Pages 2 and 4 are relevant.
    urls = ["https://a.invalid/index.html"] + [f"https://a.invalid/{i}.html" for i in range(1, 6)]
    links = [[1, 5], [2], [3], [4], [], []]
    return Web(links, [OFF, OFF, ON, OFF, ON, OFF], urls)


def test_precision_and_recall_by_hand() -> None:
    web = _chain()
    setup = FocusedSetup(strategies=("bfs",), budget=4, cycles=1, points=4, judge=Judge(0.75))
    result = evaluate_topic(web, Topic.parse("net"), setup)
    (curve,) = result.curves
    # breadth-first: index, 1, 5, 2 (ties first-come): relevant after 1..4 downloads 0,0,0,1
    assert curve.downloads == (1, 2, 3, 4)
    assert curve.precision == pytest.approx((0.0, 0.0, 0.0, 0.25))  # eq. 20
    # N_S pools the relevant pages any crawler returned: only page 2, so recall 1 at 4 ...
    assert result.relevant_pooled == 1
    assert curve.recall == pytest.approx((0.0, 0.0, 0.0, 1.0))  # eq. 21
    # ... while 2 relevant pages are reachable: the stricter recall is 1/2
    assert result.relevant_reachable == 2
    assert curve.recall_all[-1] == pytest.approx(0.5)


def test_reachable_and_default_seeds() -> None:
    web = _chain()
    assert default_seeds(web) == ("https://a.invalid/index.html",)
    assert reachable(web, [1]).tolist() == [False, True, True, True, True, False]


def test_paired_t_test() -> None:
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1/√3) = 3.464, df 2 → two-sided p = 0.0742
    mean, p = paired_t_test([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert mean == pytest.approx(2.0)
    assert p == pytest.approx(0.07417990022744858)
    assert paired_t_test([1.0, 1.0], [1.0, 1.0]) == (0.0, 1.0)


def _curve(strategy: str, cycle: int, precision: tuple[float, ...]) -> Curve:
    return Curve("t", strategy, cycle, (1, 2, 3), precision, precision, precision, (precision,), 3)


def test_learner_t_tests_and_compute_beyond_breadth_first() -> None:
    setup = FocusedSetup(strategies=("lafc-plus", "bfs"), budget=3, cycles=2, points=3)
    curves = [
        _curve("lafc-plus", 1, (2.0, 4.0, 6.0)),
        _curve("bfs", 1, (1.0, 2.0, 3.0)),
        _curve("lafc-plus", 0, (0.0, 0.0, 0.0)),
        _curve("bfs", 0, (0.0, 0.0, 0.0)),
    ]
    result = TopicResult("t", 1, 1, 1, curves, {"lafc-plus": 6.0, "bfs": 2.5}, {
        "lafc-plus": 5.5, "bfs": 2.0,
    })  # fmt: skip
    table = t_test_table([result], setup, "lafc-plus").splitlines()
    assert table[0].startswith("| topic | cycle | LAFC+ vs | mean precision (LAFC+ − other)")
    # the differences 1, 2, 3 of test_paired_t_test: mean 2, p = 0.0742, cycle 2 only
    assert table[2:] == ["| t | 2 | bfs | +2.0000 | 0.074 | + (not significant) |"]
    # CPU seconds 5.5 against breadth-first's 2.0: 3.5 beyond; wall seconds beside
    assert compute_table([result], setup).splitlines()[2:] == [
        "| t | lafc-plus | 5.5 | +3.5 | 6.0 |",
        "| t | bfs | 2.0 | +0.0 | 2.5 |",
    ]


def test_setup_refuses_bad_values() -> None:
    with pytest.raises(ValueError):
        FocusedSetup(budget=0)
    with pytest.raises(ValueError):
        FocusedSetup(points=0)


@pytest.fixture(scope="module")
def debian_docs() -> str:
    """The two smaller Debian manuals, fetched (or found in the cache) by the project's script."""
    packages = ["python3.11-doc", "postgresql-doc-15"]
    done = subprocess.run(
        ["bash", str(ROOT / "infra" / "debian-docs" / "fetch.sh"), *packages],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return "debian-docs:" + ",".join(packages)


@pytest.mark.slow
def test_reduced_evaluation_on_debian_manuals(debian_docs: str, tmp_path: Path) -> None:
    out = tmp_path / "focused"
    argv = [
        "simulate", "--web", debian_docs, "--topic", "concurrency", "--topic", "databases",
        "--strategies", "lafc,lafc-plus,best-first,bfs", "--budget", "200", "--points", "4",
        "--cycles", "2", "--runs", "2", "--lafc-c", "0.3", "--judge", "0.5",
        "--judge-min-occurrences", "5", "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    rows = list(csv.DictReader((out / "focused.csv").open()))
    # 2 topics × 4 strategies × 2 cycles × 4 checkpoints
    assert len(rows) == 64
    for row in rows:
        assert 0.0 <= float(row["precision"]) <= 1.0
        assert 0.0 <= float(row["recall"]) <= 1.0
    summary = (out / "summary.md").read_text()
    assert "| concurrency |" in summary and "LAFC vs" in summary and "LAFC+ vs" in summary
    # LAFC+ keeps every fetched page's choice in the frontier: the budget is used
    plus = [line for line in summary.splitlines() if "| lafc-plus | " in line and "/ 200 |" in line]
    assert len(plus) == 2 and all(line.endswith("| 200 / 200 |") for line in plus)
    assert (out / "precision_concurrency.png").stat().st_size > 0
