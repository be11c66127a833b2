"""A small synthetic recording of the news site, in the data's own format (tests only)."""

from __future__ import annotations

import gzip
from pathlib import Path

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
