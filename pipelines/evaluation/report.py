"""Writes an evaluation's results as the papers showed them: CSV, a Markdown table, a plot."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from frontierflow.pipelines.evaluation.plotting import headless_pyplot


@dataclass(frozen=True, slots=True)
class HotPagesCurve:
    """One strategy's share of hot pages crawled at each crawled fraction."""

    strategy: str
    crawled_fraction: tuple[float, ...]
    hot_fraction: tuple[float, ...]


def write_hot_pages_csv(path: Path, curves: Sequence[HotPagesCurve]) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["strategy", "crawled_fraction", "hot_fraction"])
        for curve in curves:
            for x, y in zip(curve.crawled_fraction, curve.hot_fraction, strict=True):
                out.writerow([curve.strategy, f"{x:.6f}", f"{y:.6f}"])


def write_summary_md(
    path: Path,
    curves: Sequence[HotPagesCurve],
    stop_at: float,
    context: Mapping[str, str],
) -> None:
    """The table at the stop point, best first, with the run's settings above it."""
    rows = sorted(curves, key=lambda c: -c.hot_fraction[-1])
    lines = [f"# Hot pages crawled at {stop_at:.0%} of the graph", ""]
    lines += [f"- {name}: {value}" for name, value in context.items()]
    lines += [
        "",
        "| strategy | crawled | hot pages crawled | mean over the crawl |",
        "|---|---:|---:|---:|",
    ]
    for c in rows:
        mean = sum(c.hot_fraction) / len(c.hot_fraction)
        lines.append(
            f"| {c.strategy} | {c.crawled_fraction[-1]:.1%} | {c.hot_fraction[-1]:.1%} "
            f"| {mean:.1%} |"
        )
    path.write_text("\n".join(lines) + "\n")


def plot_hot_pages(path: Path, curves: Sequence[HotPagesCurve], title: str) -> None:
    """Fraction of hot pages crawled against fraction crawled, like Golshani & ZarehBidoki
    2012, Figs. 4–6."""
    plt = headless_pyplot()

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for c in curves:
        ax.plot(c.crawled_fraction, c.hot_fraction, label=c.strategy, linewidth=1.6)
    ax.set_xlabel("fraction of pages crawled")
    ax.set_ylabel("fraction of hot pages crawled")
    ax.set_title(title)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
