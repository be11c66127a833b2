"""A small synthetic recording of the news site, in the data's own format (tests only)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from frontierflow.connectors.news import iso_ms

SECTIONS = ("Europe", "Football", "Business")
WORDS = ("election", "match", "market", "storm", "vote", "goal", "bank", "court")


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_recording(directory: Path, hours: int = 30) -> None:
    """A home page snapshotted every 20 minutes; a story appears every 30 minutes, stays 4 h."""
    start = iso_ms("2022-03-01T00:00:00Z")
    rows = ["url\tsection\ttitle\tfirst_seen_utc_iso\tlast_seen_utc_iso\tn_snapshots"]
    for k in range(hours * 2):
        first = start + k * 1_800_000
        section = SECTIONS[k % 3]
        title = f"{WORDS[k % 8]} {WORDS[(k * 3) % 8]} story {k}"
        url = f"https://www.bbc.com/news/s-{k}"
        rows.append(f"{url}\t{section}\t{title}\t{_iso(first)}\t{_iso(first + 4 * 3_600_000)}\t12")
    snaps = ["snapshot_time_iso\tn_links"]
    snaps += [f"{_iso(start + i * 1_200_000)}\t12" for i in range(hours * 3)]
    with gzip.open(directory / "bbc-homepage-presence.tsv.gz", "wt") as f:
        f.write("\n".join(rows) + "\n")
    (directory / "snapshots.tsv").write_text("\n".join(snaps) + "\n")


def crawl_news(directory: Path, revisit: str, budget: int, days: float) -> Any:
    """A breadth-first crawl of the recording (written to `directory`) by the fleet tests'
    news-site fetcher, from 2022-03-01 06:00 for `days`, with `--revisit` `revisit`: its
    `NewsCrawl` (the events it sent, `events`; its state, `store`)."""
    from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site
    from frontierflow.pipelines.evaluation.live_revisits import crawl_news_site
    from frontierflow.pipelines.strategies import build_strategy
    from frontierflow.state.revisit_schedule import parse_revisit

    write_recording(directory)
    setup = ForagerSetup(news=directory, start="2022-03-01T06:00:00Z", days=days)
    return crawl_news_site(
        build_site(setup), build_strategy("bfs", budget=budget), parse_revisit(revisit),
        download_ms=setup.download_ms,
    )  # fmt: skip


def latest_entries(path: Path) -> dict[str, dict[str, Any]]:
    """The latest frontier entry per URL in a JSON-lines frontier file (`replay --out`)."""
    latest: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        latest[entry["url"]] = entry
    return latest
