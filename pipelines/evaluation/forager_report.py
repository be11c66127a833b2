"""The table and figure of Palotai, Farkas & Lőrincz 2005 (CEEMAS) from
forager-fleet runs: per-run metrics, summaries, plots.

`summarise` turns one run's counters into a `RunResult` (definitions there; where the
paper's were lost, ours); `write_reports` writes runs.csv, efficiency.csv, summary.md and
the efficiency figure (the paper's Fig. 1(b)).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frontierflow.pipelines.evaluation.forager_fleet import FleetMetrics, ForagerSetup
from frontierflow.pipelines.evaluation.news_graph import GraphMeasures
from frontierflow.pipelines.evaluation.news_site import DAY_MS, HOUR_MS, NewsSite
from frontierflow.pipelines.evaluation.plotting import headless_pyplot

FRESHNESS_STEP_MS = 15 * 60_000


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run's metrics (the paper's Fig. 1(a)); its definitions were lost, these are
    ours where noted:

    - downloaded: page downloads; sent: documents sent to the RA; relevant: documents the RA
      rewarded (on topic, new to the RA, not older than 24 h); found URLs: distinct URLs
      downloaded;
    - download efficiency = relevant / downloaded; sent efficiency = relevant / sent;
      exploration = found URLs / downloaded (both match the paper's table arithmetic);
    - age (ours): mean hours from a relevant story's publication to its reward (stories
      published during the run; older ones would count the time before the run started);
    - freshness (ours, after Cho & Garcia-Molina): the share of on-topic stories published in
      the last 24 h that the RA already holds, averaged over the run every 15 minutes.
    """

    site: str
    variant: str
    run: int
    downloaded: int
    sent: int
    relevant: int
    found_urls: int
    download_efficiency: float
    sent_efficiency: float
    exploration: float
    freshness: float
    age_hours: float
    final_population: int
    efficiency_series: tuple[float, ...]


TABLE_ROWS = (
    ("downloaded", "downloaded", "{:.0f}"),
    ("sent", "sent", "{:.0f}"),
    ("relevant", "relevant", "{:.0f}"),
    ("found URLs", "found_urls", "{:.0f}"),
    ("download eff", "download_efficiency", "{:.4f}"),
    ("sent eff", "sent_efficiency", "{:.3f}"),
    ("exploration", "exploration", "{:.3f}"),
    ("freshness", "freshness", "{:.3f}"),
    ("age (hours)", "age_hours", "{:.2f}"),
)


def freshness_and_age(
    site: NewsSite, topic: Sequence[str], m: FleetMetrics, since_ms: int | None = None
) -> tuple[float, float]:
    """Freshness (share of the last 24 h's on-topic stories already rewarded, averaged every
    15 minutes) and age (mean hours from publication to reward); see the module docstring.
    Both from `since_ms` (default: the site's start) to the site's end."""
    since = site.start_ms if since_ms is None else since_ms
    wanted = frozenset(topic)
    pubs = []
    found = []
    for url, story in site.stories.items():
        if story.section in wanted:
            pubs.append(story.published_ms)
            found.append(m.rewarded_at.get(url, math.inf))
    pub = np.array(pubs, dtype=float)
    got = np.array(found, dtype=float)
    shares = []
    for s in range(since, site.end_ms + 1, FRESHNESS_STEP_MS):
        live = (pub > s - DAY_MS) & (pub <= s)
        if live.any():
            shares.append(float(np.mean(got[live] <= s)))
    ages = [
        (t - site.stories[u].published_ms) / HOUR_MS
        for u, t in m.rewarded_at.items()
        if u in site.stories and site.stories[u].published_ms >= since
    ]
    freshness = float(np.mean(shares)) if shares else 0.0
    return freshness, float(np.mean(ages)) if ages else math.nan


def summarise(
    site: NewsSite, setup: ForagerSetup, site_name: str, variant: str, run: int, m: FleetMetrics
) -> RunResult:
    freshness, age = freshness_and_age(site, setup.topic, m)
    series = tuple(
        r / d if d else 0.0 for r, d in zip(m.bin_relevant, m.bin_downloads, strict=True)
    )
    return RunResult(
        site=site_name,
        variant=variant,
        run=run,
        downloaded=m.downloaded,
        sent=m.sent,
        relevant=m.relevant,
        found_urls=len(m.found),
        download_efficiency=m.relevant / max(1, m.downloaded),
        sent_efficiency=m.relevant / max(1, m.sent),
        exploration=len(m.found) / max(1, m.downloaded),
        freshness=freshness,
        age_hours=age,
        final_population=m.population[-1] if m.population else 1,
        efficiency_series=series,
    )


def _stats(rows: Sequence[RunResult], attr: str) -> tuple[float, float]:
    values = np.array([float(getattr(r, attr)) for r in rows])
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def summary_table(results: Sequence[RunResult], site_name: str) -> list[str]:
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        if r.site == site_name:
            groups.setdefault(r.variant, []).append(r)
    names = list(groups)
    head = "| type | " + " | ".join(f"{n.upper()} | std {n.upper()}" for n in names) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(names)]
    for label, attr, fmt in TABLE_ROWS:
        cells = []
        for n in names:
            mean, std = _stats(groups[n], attr)
            cells += [fmt.format(mean), fmt.format(std)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def write_reports(
    out: Path, setup: ForagerSetup, results: Sequence[RunResult], graphs: dict[str, GraphMeasures]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["site", "variant", "run", *(attr for _, attr, _ in TABLE_ROWS), "population"])
        for r in results:
            values = (getattr(r, a) for _, a, _ in TABLE_ROWS)
            w.writerow([r.site, r.variant, r.run, *values, r.final_population])
    with (out / "efficiency.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["site", "variant", "run", "hours", "download_efficiency"])
        for r in results:
            for i, e in enumerate(r.efficiency_series):
                w.writerow([r.site, r.variant, r.run, 3 * (i + 1), f"{e:.6f}"])
    lines = [
        "# Forager fleets on the news site (the table of Palotai, Farkas & Lőrincz 2005, CEEMAS)",
        "",
        f"- start {setup.start}, {setup.days:g} days, download {setup.download_ms} ms a page",
        f"- topic: {', '.join(setup.topic)}",
        "",
    ]
    for site_name in dict.fromkeys(r.site for r in results):
        lines += [f"## {site_name}", "", *summary_table(results, site_name), ""]
    lines += ["## Link graph at the end of the run", ""]
    lines += [
        "| site | nodes | edges | mean out | max in | in α (k_min) | out α (k_min) "
        "| clustering | random C | path length | random L |",
        "|---|" + "---:|" * 10,
    ]
    for name, g in graphs.items():
        lines.append(
            f"| {name} | {g.nodes} | {g.edges} | {g.mean_out_degree:.1f} | {g.max_in_degree} "
            f"| {g.in_exponent:.2f} ({g.in_kmin}) | {g.out_exponent:.2f} ({g.out_kmin}) "
            f"| {g.clustering:.3f} | {g.random_clustering:.4f} | {g.path_length:.2f} "
            f"| {g.random_path_length:.2f} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    plot_efficiency(out / "efficiency.png", results)


def plot_efficiency(path: Path, results: Sequence[RunResult]) -> None:
    """The paper's Fig. 1(b): download efficiency in 3-hour intervals, one line per run."""
    plt = headless_pyplot()

    panels = [v for v in dict.fromkeys(r.variant for r in results if r.site == "sfsw")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.2 * len(panels)), sharex=True)
    axes_list = list(np.atleast_1d(axes))
    for ax, variant in zip(axes_list, panels, strict=True):
        for r in results:
            if r.site == "sfsw" and r.variant == variant:
                days = [3 * (i + 1) / 24 for i in range(len(r.efficiency_series))]
                ax.plot(days, r.efficiency_series, linewidth=1.0, label=f"run {r.run}")
        ax.set_ylabel(variant.upper())
        ax.grid(alpha=0.3)
    axes_list[-1].set_xlabel("days")
    fig.suptitle("download efficiency (relevant / downloaded) per 3 hours")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
