"""The news site and the closed-loop forager fleet on a small synthetic recording (seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from news_recording import write_recording

from frontierflow.connectors.news import NewsFormatError, read_stays
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.evaluation.forager_fleet import (
    ForagerSetup,
    build_site,
    run_baseline,
    run_fleet,
)
from frontierflow.pipelines.evaluation.forager_report import summarise
from frontierflow.pipelines.evaluation.news_site import HOME, section_url
from frontierflow.state.forager import Variant


@pytest.fixture
def setup(tmp_path: Path) -> ForagerSetup:
    write_recording(tmp_path)
    return ForagerSetup(news=tmp_path, start="2022-03-01T06:00:00Z", days=1.0, topic=("Europe",))


def test_site_serves_pages_as_they_were(setup: ForagerSetup) -> None:
    site = build_site(setup)
    t = site.start_ms
    home = site.page(HOME, t)
    assert home.links[:3] == tuple(section_url(s) for s in site.sections)
    on_home = [u for u in home.links if u.startswith("https://www.bbc.com/news/")]
    assert on_home and all(site.stories[u].published_ms <= t for u in on_home)
    story = site.page(on_home[0], t)
    assert story.links[:2] == (HOME, section_url(site.stories[on_home[0]].section))
    assert story.published_ms == site.stories[on_home[0]].published_ms
    assert story.x.shape == (50,) and abs(story.x).max() <= 1.0
    later = site.page(HOME, t + 6 * 3_600_000)
    assert set(later.links) != set(home.links)  # the home page changed


def test_rewiring_keeps_the_number_of_story_links(setup: ForagerSetup) -> None:
    plain = build_site(setup)
    rewired = build_site(setup, rewired=True)
    n_plain = sum(len(v) for v in plain.story_links.values())
    n_rewired = sum(len(v) for v in rewired.story_links.values())
    assert n_rewired <= n_plain and n_rewired >= 0.8 * n_plain  # self-links/repeats dropped
    assert rewired.story_links != plain.story_links


@pytest.mark.parametrize("variant", list(Variant))
def test_fleet_run_counts_add_up_and_replay_bit_for_bit(
    setup: ForagerSetup, variant: Variant
) -> None:
    site = build_site(setup)
    first = run_fleet(site, setup, variant, seed=1)
    again = run_fleet(build_site(setup), setup, variant, seed=1)
    assert first.rewarded_at == again.rewarded_at and first.downloaded == again.downloaded
    assert sum(first.bin_downloads) == first.downloaded
    assert sum(first.bin_relevant) == first.relevant == len(first.rewarded_at)
    assert 0 < first.relevant <= first.sent
    assert all(site.stories[u].section == "Europe" for u in first.rewarded_at)
    result = summarise(site, setup, "sfsw", variant.value, 0, first)
    assert 0.0 < result.freshness <= 1.0
    assert result.exploration == len(first.found) / first.downloaded


def test_baseline_finds_each_story_once(setup: ForagerSetup) -> None:
    site = build_site(setup)
    m = run_baseline(site, setup)
    assert m.relevant == len(m.rewarded_at) and m.sent >= m.relevant > 0


def test_command_writes_table_csv_and_plot(setup: ForagerSetup, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["simulate", "foragers", "--news", str(setup.news), "--start", setup.start]
    args += ["--days", "0.25", "--runs", "2", "--topic", "Europe", "--out", str(out)]
    assert main(args) == 0
    summary = (out / "summary.md").read_text()
    assert "| sent eff |" in summary and "## rewired" in summary
    assert (out / "efficiency.png").stat().st_size > 0
    assert (out / "runs.csv").read_text().count("\n") == 2 * (3 * 2 + 1) + 1


def test_a_malformed_recording_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bbc-homepage-presence.tsv").write_text("url\tnope\n")
    with pytest.raises(NewsFormatError):
        list(read_stays(tmp_path))


NEWS = Path(__file__).resolve().parents[4] / "shared" / "data" / "news"


@pytest.mark.slow
@pytest.mark.skipif(not NEWS.is_dir(), reason="the shared news recording is absent")
def test_half_a_day_on_the_real_news_site(tmp_path: Path) -> None:
    """The reduced evaluation of docs/FORAGERS.md on the real recording: every variant and
    the baseline download at the same rate, and the agent's counts nest."""
    out = tmp_path / "real"
    args = ["simulate", "foragers", "--news", str(NEWS), "--days", "0.5", "--runs", "1"]
    assert main([*args, "--no-rewired", "--out", str(out)]) == 0
    rows = [line.split(",") for line in (out / "runs.csv").read_text().splitlines()]
    head, body = rows[0], rows[1:]
    got = {row[head.index("variant")]: dict(zip(head, row, strict=True)) for row in body}
    assert set(got) == {"wl", "rl", "wlrl", "baseline"}
    for row in got.values():
        downloaded, sent, relevant = (int(row[k]) for k in ("downloaded", "sent", "relevant"))
        assert 4_300 <= downloaded <= 4_340  # 12 h at one page every 10 s = 4,320
        assert 0 < relevant <= sent <= downloaded


@pytest.mark.slow
@pytest.mark.skipif(not NEWS.is_dir(), reason="the shared news recording is absent")
def test_the_fleet_operator_walks_the_real_site_as_the_direct_simulation() -> None:
    """`bench foragers` exits 1 when a variant's walk in the engine differs from `run_fleet`'s."""
    assert main(["bench", "foragers", "--news", str(NEWS), "--days", "0.25"]) == 0
