"""`frontierflow bench-foragers`: the forager fleet operator in the embedded engine against the
direct simulation of the same walk (`run_fleet`), on the news site, in one run.

Both walk the site identically (a test holds them equal; this command checks the counts
again). The engine pays for what a live job needs — a FetchEvent per download, routing,
the fleet's state encoded and committed at every step — and here every download is its
own step, the worst case (a live job takes a step's probes together). CPU seconds of this
process, so a shared machine's load bends the figures less than wall time would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from frontierflow.pipelines.evaluation.forager_engine import run_fleet_on_engine
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site, run_fleet
from frontierflow.state.forager import Variant


@dataclass(frozen=True, slots=True)
class ForagerBenchRow:
    variant: str
    downloads: int
    same_walk: bool
    direct_s: float
    engine_s: float
    state_bytes: int

    @property
    def engine_events_per_s(self) -> float:
        return self.downloads / self.engine_s if self.engine_s > 0 else float("inf")


def run_forager_bench(
    news: Path, days: float, variants: tuple[str, ...], seed: int = 0
) -> list[ForagerBenchRow]:
    setup = ForagerSetup(news=news, days=days)
    site = build_site(setup)
    rows = []
    for name in variants:
        variant = Variant(name)
        t0 = time.process_time()
        direct = run_fleet(site, setup, variant, seed)
        t1 = time.process_time()
        engine = run_fleet_on_engine(site, setup, variant, seed)
        t2 = time.process_time()
        c = engine.counters
        same = (c.downloads, c.sent, c.relevant) == (
            direct.downloaded,
            direct.sent,
            direct.relevant,
        )
        rows.append(ForagerBenchRow(name, c.downloads, same, t1 - t0, t2 - t1, len(engine.state)))
    return rows


def format_rows(rows: list[ForagerBenchRow], days: float) -> str:
    lines = [
        f"forager fleets, {days:g} days of the news site, CPU seconds of one process",
        "",
        "| variant | downloads | same walk | direct s | engine s | engine events/s | fleet state |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.variant} | {r.downloads:,} | {'yes' if r.same_walk else 'NO'} | "
            f"{r.direct_s:.2f} | {r.engine_s:.2f} | {r.engine_events_per_s:,.0f} | "
            f"{r.state_bytes / 1024:,.0f} KiB |"
        )
    return "\n".join(lines)
