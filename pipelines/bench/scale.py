"""`frontierflow bench --scale`: IECA + RocksDB throughput and memory as the URL count grows.

The same generated log shape (`pipelines.bench.engine`: the same events, outlinks and
popularity skew) is made once per URL population, by default 1M and 10M URLs, and replayed
by IECA with RocksDB state, each run in its own process. The report gives each
population's events/s, the worker's peak RSS (its own `ru_maxrss`), how many distinct URLs
the log really holds (popularity is skewed: a population is only partly drawn), and the
ratio of the largest population's rate to the smallest's, beside the targets.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from frontierflow.pipelines.bench.engine import (
    BenchLog,
    BenchSetup,
    generate_log,
    spawn_bench_worker,
)

RATE_TARGET = 0.9
"""Events/s at the largest population over events/s at the smallest should reach this."""
RSS_TARGET_MB = 400.0
"""The worker's peak RSS at the largest population should stay under this (10^6 bytes)."""


@dataclass(frozen=True, slots=True)
class ScaleSetup:
    populations: tuple[int, ...] = (1_000_000, 10_000_000)
    events: int = 200_000
    outlinks: int = 30
    step_size: int = 500
    repeats: int = 1

    def __post_init__(self) -> None:
        if len(self.populations) < 2:
            raise ValueError("--scale needs at least two URL populations to compare")
        if len(set(self.populations)) != len(self.populations):
            raise ValueError(f"URL populations repeat: {self.populations}")
        for urls in self.populations:  # the same checks as one bench run
            BenchSetup(self.events, self.outlinks, urls, self.step_size, self.repeats)

    def bench_setup(self, urls: int) -> BenchSetup:
        return BenchSetup(self.events, self.outlinks, urls, self.step_size, self.repeats)


def run_scale_bench(setup: ScaleSetup, work_dir: Path | None = None) -> str:
    """Generate one log per population, replay each with IECA `repeats` times (the
    populations in turn), and format the report."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        logs: dict[int, BenchLog] = {}
        for urls in setup.populations:
            path = root / f"events-{urls}.avro"
            logs[urls] = BenchLog(path, setup.events, generate_log(path, setup.bench_setup(urls)))
        runs: dict[int, list[dict[str, float]]] = {urls: [] for urls in setup.populations}
        for i in range(setup.repeats):
            for urls in setup.populations:
                work = root / f"ieca-{urls}-{i}"
                work.mkdir()
                runs[urls].append(
                    spawn_bench_worker("ieca", logs[urls].path, work, setup.step_size)
                )
        return scale_report(setup, logs, runs)


def scale_report(
    setup: ScaleSetup, logs: dict[int, BenchLog], runs: dict[int, list[dict[str, float]]]
) -> str:
    """The table and the target lines; figures are medians over the repeats."""

    def med(urls: int, key: str) -> float:
        return statistics.median(r[key] for r in runs[urls])

    rate = {u: statistics.median(r["events"] / r["seconds"] for r in runs[u]) for u in runs}
    links = {u: statistics.median(r["links"] / r["seconds"] for r in runs[u]) for u in runs}
    per_cpu = {u: statistics.median(r["events"] / r["cpu_seconds"] for r in runs[u]) for u in runs}
    small, large = min(setup.populations), max(setup.populations)
    lines = [
        f"scale: IECA + RocksDB, {setup.events:,} FetchEvents per log, {setup.outlinks} "
        f"outlinks each, step {setup.step_size}; median of {setup.repeats} run(s) per "
        "population, in turn, each in its own process",
        f"{'URLs':>12}{'in log':>12}{'log MB':>9}{'events/s':>10}{'link upd/s':>12}"
        f"{'seconds':>9}{'CPU s':>8}{'peak RSS MiB':>14}{'vs smallest':>13}{'(CPU)':>7}",
    ]
    for urls in sorted(setup.populations):
        lines.append(
            f"{urls:>12,}{logs[urls].distinct_urls:>12,}{logs[urls].megabytes:>9.0f}"
            f"{rate[urls]:>10,.0f}{links[urls]:>12,.0f}{med(urls, 'seconds'):>9.1f}"
            f"{med(urls, 'cpu_seconds'):>8.1f}{med(urls, 'peak_rss_mib'):>14.0f}"
            f"{rate[urls] / rate[small]:>13.3f}{per_cpu[urls] / per_cpu[small]:>7.3f}"
        )
    ratio = rate[large] / rate[small]
    cpu_ratio = per_cpu[large] / per_cpu[small]
    rss_mb = med(large, "peak_rss_mib") * 1024 * 1024 / 1e6
    lines += [
        "URLs: the population the outlinks are drawn from; in log: distinct URLs the log "
        "really holds (pages and outlinks), which is what the state grows to",
        f"events/s at {large:,} URLs / at {small:,}: {ratio:.3f} "
        f"(target >= {RATE_TARGET}: {_verdict(ratio >= RATE_TARGET)}); events per CPU "
        f"second: {cpu_ratio:.3f} ({_verdict(cpu_ratio >= RATE_TARGET)})",
        f"worker peak RSS at {large:,} URLs: {rss_mb:.0f} MB "
        f"(target < {RSS_TARGET_MB:.0f} MB: {_verdict(rss_mb < RSS_TARGET_MB)})",
    ]
    return "\n".join(lines)


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def parse_populations(values: Sequence[str]) -> tuple[int, ...]:
    """`--scale-urls 1000000,10000000` as integers (underscores allowed)."""
    try:
        return tuple(int(v.replace("_", "")) for v in values)
    except ValueError as exc:
        raise ValueError(f"--scale-urls takes whole numbers, got {','.join(values)}") from exc
