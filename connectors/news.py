"""Reads a recorded news home page: continuous stays of stories and the snapshot times.

The format is `../shared/data/news/` (see its README): `bbc-homepage-presence.tsv.gz`, one
row per stay of a story on the home page (url, section, title, first and last seen in UTC
ISO 8601, snapshots), and `snapshots.tsv.gz` (snapshot time, number of links). Empty
snapshots are failed scrapes and are left out. Plain `.tsv` files are read too.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

PRESENCE = "bbc-homepage-presence.tsv"
SNAPSHOTS = "snapshots.tsv"


class NewsFormatError(ValueError):
    """A news recording file is missing or malformed."""


@dataclass(frozen=True, slots=True)
class Stay:
    """One continuous stay of a story on the home page (times in epoch milliseconds)."""

    url: str
    section: str
    title: str
    first_ms: int
    last_ms: int


def iso_ms(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 UTC time such as 2021-07-12T01:08:43Z."""
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError as exc:
        raise NewsFormatError(f"not an ISO 8601 time: {text!r}") from exc


def _open(directory: Path, name: str) -> IO[str]:
    for path in (directory / (name + ".gz"), directory / name):
        if path.exists():
            if path.suffix == ".gz":
                return gzip.open(path, "rt", encoding="utf-8", newline="")
            return path.open(encoding="utf-8", newline="")
    raise NewsFormatError(f"{directory} has no {name}(.gz)")


def read_stays(directory: Path) -> Iterator[Stay]:
    """Every stay in file order."""
    with _open(directory, PRESENCE) as f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows, None)
        if header is None or header[:5] != ["url", "section", "title", "first_seen_utc_iso",
                                            "last_seen_utc_iso"]:  # fmt: skip
            raise NewsFormatError(f"{PRESENCE}: unexpected header {header!r}")
        for line, row in enumerate(rows, start=2):
            if len(row) < 5:
                raise NewsFormatError(f"{PRESENCE}:{line}: {len(row)} fields, want 6")
            first, last = iso_ms(row[3]), iso_ms(row[4])
            if last < first:
                raise NewsFormatError(f"{PRESENCE}:{line}: last seen before first seen")
            yield Stay(row[0], row[1], row[2], first, last)


def read_snapshot_times(directory: Path) -> list[int]:
    """Times of the non-empty snapshots, ascending."""
    times: list[int] = []
    with _open(directory, SNAPSHOTS) as f:
        rows = csv.reader(f, delimiter="\t")
        next(rows, None)
        for line, row in enumerate(rows, start=2):
            if len(row) < 2:
                raise NewsFormatError(f"{SNAPSHOTS}:{line}: {len(row)} fields, want 2")
            try:
                links = int(row[1])
            except ValueError as exc:
                raise NewsFormatError(f"{SNAPSHOTS}:{line}: bad link count") from exc
            if links > 0:
                times.append(iso_ms(row[0]))
    times.sort()
    return times
