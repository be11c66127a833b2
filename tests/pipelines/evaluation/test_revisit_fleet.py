"""The weblog fleet whose paths start on the discovery rule's schedule: the schedule worked
by hand, and both fleets on a synthetic recording."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from news_recording import write_recording

from frontierflow.pipelines.cli import main
from frontierflow.pipelines.evaluation.forager_fleet import (
    BIN_MS,
    FleetMetrics,
    ForagerSetup,
    build_site,
)
from frontierflow.pipelines.evaluation.revisit_fleet import (
    LearnedPathStarts,
    measured_from,
    run_fleet_revisits,
)
from frontierflow.pipelines.evaluation.revisit_policy import Policy, RevisitPolicySettings
from frontierflow.state.revisits import HOUR_MS, RevisitSettings


def test_a_path_starts_at_the_page_the_schedule_has_due() -> None:
    """Path starts at 0 and 1 h: nothing has an estimate, the forager's choice stands.
    Page A: first download at 0 shows s1, s2 (1 rewarded), at 1 h also s3 (1 rewarded):
    one revisit, 2 stories in 1 h watched = 2 per hour. Page B shows nothing new: rate 0.
    At 2 h the plan shares the last day's starts, 2 in 2 h = 1 per hour, all to A: due at
    1 h + 1 h = 2 h, so the path starts at A; once only (A is due again after its next
    download)."""
    settings = RevisitPolicySettings(revisit=RevisitSettings(min_revisits=1), plan_ms=HOUR_MS)
    starts = LearnedPathStarts(settings, start_ms=0)
    assert starts.start("mine", 0) == "mine"
    starts.step("A", ("s1", "s2"), 0, 1)
    starts.step("B", ("s1",), 0, 0)
    assert starts.start("mine", HOUR_MS) == "mine"
    starts.step("A", ("s1", "s2", "s3"), HOUR_MS, 1)
    starts.step("B", ("s1",), HOUR_MS, 0)
    assert starts.pages["A"].relevant == 2.0 and starts.pages["A"].found == 1.0
    assert starts.start("mine", 2 * HOUR_MS) == "A"
    assert starts.frequency == {"A": pytest.approx(1 / HOUR_MS)}
    assert starts.start("mine", 2 * HOUR_MS) == "mine"
    assert (starts.starts, starts.scheduled) == (4, 1)


def test_a_fleet_run_is_counted_from_the_end_of_its_warm_up() -> None:
    fleet = FleetMetrics(
        downloaded=10, relevant=3, bin_downloads=[4, 6], bin_relevant=[1, 2], sent=5
    )
    m = measured_from(fleet, BIN_MS, 0).fleet
    assert (m.downloaded, m.relevant, m.sent, m.bin_downloads) == (6, 2, 0, [6])
    with pytest.raises(ValueError, match="whole number of 3-hour bins"):
        measured_from(fleet, HOUR_MS, 0)


@pytest.fixture
def setup(tmp_path: Path) -> ForagerSetup:
    write_recording(tmp_path)
    return ForagerSetup(news=tmp_path, start="2022-03-01T06:00:00Z", days=1.0, topic=("Europe",))


def test_both_fleets_run_and_the_learned_one_starts_paths_on_the_schedule(
    setup: ForagerSetup,
) -> None:
    """Half a day at one page a minute after a 6-hour warm-up: 1,080 downloads counted
    (a started step is finished, so a few more)."""
    site = build_site(setup)
    measure = site.start_ms + 6 * HOUR_MS
    for policy in (Policy.FLEET, Policy.FLEET_LEARNED):
        m = run_fleet_revisits(
            site, setup.topic, policy, 60_000, RevisitPolicySettings(), measure, run=0
        )
        assert 1_080 <= m.fleet.downloaded < 1_200
        assert m.fleet.relevant > 0
    with pytest.raises(ValueError, match="not a fleet"):
        run_fleet_revisits(
            site, setup.topic, Policy.DISCOVERY, 60_000, RevisitPolicySettings(), measure, 0
        )


def test_the_command_reports_the_fleets_apart(setup: ForagerSetup, tmp_path: Path) -> None:
    out = tmp_path / "fleets"
    args = ["simulate", "revisits", "--news", str(setup.news), "--topic", "Europe"]
    args += ["--starts", "2022-03-01T12:00:00Z", "--days", "0.25", "--warmup-days", "0.25"]
    args += ["--download-ms", "60000", "--workers", "1", "--out", str(out)]
    args += ["--policies", "fixed,fleet,fleet-learned"]
    assert main(args) == 0
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert [r["policy"] for r in rows] == ["fixed", "fleet", "fleet-learned"]
    summary = (out / "summary.md").read_text()
    assert "### the weblog fleet, and the same fleet on the learned schedule" in summary
    assert "| fleet-learned | " in summary
