"""The report of `frontierflow bench --scale`: one row per population and store variant,
what RocksDB did for the reads, the restart after a kill, and the targets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from frontierflow.pipelines.bench.scale_state import DEFAULT, HELD
from frontierflow.pipelines.embedded.replay import REPLAY_COMMIT_EVERY

if TYPE_CHECKING:
    from frontierflow.pipelines.bench.scale_state import ScaleSetup

RATE_TARGET = 0.8
"""Events/s at the largest population over events/s at the smallest should reach this."""
RSS_TARGET_MB = 1000.0
"""The replay's peak RSS at the largest population should stay under this (10^6 bytes)."""
RESTART_TARGET_S = 10.0
"""From the start of the process after a kill -9 to its first committed step."""

Figures = dict[str, float]


@dataclass
class ScaleRuns:
    """What the bench measured, by population and variant."""

    populations: tuple[int, ...]
    variants: tuple[str, ...]
    built: dict[tuple[int, str], Figures] = field(default_factory=dict)
    replayed: dict[tuple[int, str], Figures] = field(default_factory=dict)
    new_urls: dict[int, int] = field(default_factory=dict)
    """Distinct URLs the log links to that the state did not hold."""
    restarts: dict[int, Figures] = field(default_factory=dict)
    live: dict[int, Figures] = field(default_factory=dict)
    """The live job's run on each population (`scale_live`), when a broker was given."""

    again: dict[tuple[int, str], list[Figures]] = field(default_factory=dict)
    """Each variant's replays after its first, by population and variant
    (`ScaleSetup.repeats`)."""

    def add(self, urls: int, variant: str, figures: dict[str, Figures]) -> None:
        self.built[urls, variant] = figures["build"]
        self.replayed[urls, variant] = figures["replay"]

    def add_again(self, urls: int, variant: str, replayed: Figures) -> None:
        self.again.setdefault((urls, variant), []).append(replayed)

    def again_variants(self) -> set[str]:
        """The variants whose replays were done again."""
        return {variant for _, variant in self.again}

    def rounds(self, urls: int, variant: str = DEFAULT) -> list[Figures]:
        """A variant's replays at `urls`, the first one first."""
        return [self.replayed[urls, variant], *self.again.get((urls, variant), [])]


def write_amplification(run: Figures) -> float:
    """Bytes RocksDB wrote to SST files (flushes and compactions) over the bytes the
    engine's write batches held."""
    return (run["flushed"] + run["compacted"]) / max(1.0, run["written"])


def scale_report(setup: ScaleSetup, runs: ScaleRuns) -> str:
    log = setup.log
    small, large = min(runs.populations), max(runs.populations)
    lines = [
        f"scale: IECA + RocksDB over N URLs already in state (built in bulk, SST files "
        f"ingested, not timed), then {log.events:,} FetchEvents of {log.outlinks} outlinks "
        f"({log.new_links} to new URLs, the rest to known ones by popularity), step "
        f"{setup.step_size}; one run of each, in turn, each in its own process",
        f"{'URLs':>12} {'variant':<24}{'in state after':>15}{'build s':>9}{'events/s':>10}"
        f"{'link upd/s':>11}{'seconds':>9}{'CPU s':>7}{'peak RSS MiB':>13}{'SST B/URL':>10}"
        f"{'write amp':>10}{'vs smallest':>12}{'(CPU)':>7}",
    ]
    rate, per_cpu = {}, {}
    for key, run in runs.replayed.items():
        rate[key] = run["events"] / run["seconds"]
        per_cpu[key] = run["events"] / run["cpu_seconds"]
    for urls in sorted(runs.populations):
        for variant in runs.variants:
            run, key = runs.replayed[urls, variant], (urls, variant)
            in_state = urls + runs.new_urls[urls]
            lines.append(
                f"{urls:>12,} {variant:<24}{in_state:>15,}{runs.built[key]['seconds']:>9.0f}"
                f"{rate[key]:>10,.0f}{run['links'] / run['seconds']:>11,.0f}"
                f"{run['seconds']:>9.1f}{run['cpu_seconds']:>7.1f}{run['peak_rss_mib']:>13.0f}"
                f"{run['sst_bytes'] / in_state:>10.1f}{write_amplification(run):>10.2f}"
                f"{rate[key] / rate[small, variant]:>12.3f}"
                f"{per_cpu[key] / per_cpu[small, variant]:>7.3f}"
            )
    lines += [
        "in state after: URLs in the strategy's family once the log is replayed; SST B/URL: "
        "bytes of all SST files after the run over those URLs; write amp: bytes flushed and "
        "compacted to SST files over the bytes of the engine's write batches (RocksDB's "
        "statistics; the write-ahead log, as many bytes again, not counted)",
        "",
        "reads and memory of each run (RocksDB's statistics):",
        f"{'URLs':>12} {'variant':<24}{'filter: no':>12}{'bloom FP %':>11}"
        f"{'filter miss':>12}{'data miss':>11}{'cache MiB':>10}{'pinned':>8}{'memtables':>10}"
        f"{'stall s':>8}{'pending MB':>11}{'disk MB':>9}",
    ]
    for urls in sorted(runs.populations):
        for variant in runs.variants:
            run = runs.replayed[urls, variant]
            false_positives = run["bloom_positive"] - run["bloom_true_positive"]
            negatives = run["bloom_useful"] + false_positives
            lines.append(
                f"{urls:>12,} {variant:<24}{negatives:>12,.0f}"
                f"{100 * false_positives / max(1.0, negatives):>11.2f}"
                f"{run['filter_miss']:>12,.0f}{run['data_miss']:>11,.0f}"
                f"{run['cache_usage'] / 2**20:>10.0f}{run['cache_pinned'] / 2**20:>8.0f}"
                f"{run['memtables'] / 2**20:>10.0f}{run['stall_micros'] / 1e6:>8.1f}"
                f"{run['pending_compaction'] / 1e6:>11.0f}"
                f"{run.get('disk_read_bytes', 0.0) / 1e6:>9.0f}"
            )
    lines += [
        "filter: no: SST files a Bloom filter ruled out for a read of a key they do not hold "
        "(no data block read); bloom FP: of the filter checks for such keys, those that read "
        "a data block for nothing; filter miss, data miss: filter and data blocks read from files "
        "(the page cache or the disk) for want of them in the block cache; cache: block "
        "cache in use at the end (memtables charged to it included), pinned: of which "
        "pinned index and filter blocks; pending: RocksDB's estimate of compaction left; "
        "disk: bytes the replay had read from the disk (reads the page cache answered are "
        "not counted)",
    ]
    if runs.live:
        lines += ["", *_live_lines(runs, rate)]
    if runs.restarts:
        lines += [
            "",
            f"restart: the {DEFAULT} run again on a copy of the state, SIGKILLed after step "
            f"{setup.kill_at}'s outputs were flushed (inside a commit interval of "
            f"{REPLAY_COMMIT_EVERY}), then started again; seconds from the new process's start",
            f"{'URLs':>12}{'WAL MB':>8}{'to store open':>15}{'to 1st commit':>15}"
            f"{'keys compared':>15}{'differ':>8}{'frontier blocks':>17}{'differ':>8}",
        ]
        for urls in sorted(runs.restarts):
            r = runs.restarts[urls]
            lines.append(
                f"{urls:>12,}{r['wal_bytes'] / 1e6:>8.0f}{r['to_open']:>15.2f}"
                f"{r['to_first_commit']:>15.2f}{r['keys']:>15,.0f}{r['differences']:>8,.0f}"
                f"{r['blocks']:>17,.0f}{r['block_differences']:>8,.0f}"
            )
    ratio = rate[large, DEFAULT] / rate[small, DEFAULT]
    cpu_ratio = per_cpu[large, DEFAULT] / per_cpu[small, DEFAULT]
    rss_mb = max(r["peak_rss_mib"] for r in runs.rounds(large)) * 2**20 / 1e6
    how = ""
    if setup.repeats > 1:
        round_lines, ratio, cpu_ratio = _rounds(runs, setup.repeats)
        lines += ["", *round_lines]
        how = f", the median of {setup.repeats} rounds' ratios"
    lines += [
        "",
        f"events/s at {large:,} URLs / at {small:,} ({DEFAULT}{how}): {ratio:.3f} "
        f"(target >= {RATE_TARGET}: {_verdict(ratio >= RATE_TARGET)}); events per CPU "
        f"second: {cpu_ratio:.3f} ({_verdict(cpu_ratio >= RATE_TARGET)})",
    ]
    if (large, HELD) in runs.replayed:
        held = runs.replayed[large, HELD]
        how = "locked" if held["held_locked"] else "read once, not locked (no right to lock)"
        lines.append(
            f"the same with the state's files held in memory ({HELD}: "
            f"{held['held_bytes'] / 1e9:.2f} GB in {held['held_files']:.0f} files at "
            f"{large:,} URLs, {how}): "
            f"{rate[large, HELD] / rate[small, HELD]:.3f}, per CPU second "
            f"{per_cpu[large, HELD] / per_cpu[small, HELD]:.3f}"
        )
    lines += [
        f"replay peak RSS at {large:,} URLs: {rss_mb:.0f} MB "
        f"(target < {RSS_TARGET_MB:.0f} MB: {_verdict(rss_mb < RSS_TARGET_MB)})",
    ]
    if large in runs.restarts:
        r = runs.restarts[large]
        same = r["differences"] == 0 and r["block_differences"] == 0
        lines.append(
            f"restart at {large:,} URLs: first commit {r['to_first_commit']:.2f} s after the "
            f"start (target < {RESTART_TARGET_S:.0f} s: "
            f"{_verdict(r['to_first_commit'] < RESTART_TARGET_S)}); state and frontier as "
            f"the uninterrupted run's: {'yes' if same else 'NO'}"
        )
    return "\n".join(lines)


def _rounds(runs: ScaleRuns, repeats: int) -> tuple[list[str], float, float]:
    """Each variant's rounds (`_variant_rounds`), and the medians of the default's ratios
    (events/s, events per CPU second)."""
    lines = [
        "rounds of each variant's replay: the first as above (each population built, then "
        "run), then each population's again on a fresh copy of its state, the largest "
        "first in even rounds; ratio: the round's largest population over its smallest; "
        "CPU s and peak RSS: the largest population's run",
    ]
    medians = {}
    for variant in runs.variants:
        if variant in runs.again_variants():
            variant_lines, medians[variant] = _variant_rounds(runs, repeats, variant)
            lines += variant_lines
    ratio, cpu_ratio = medians[DEFAULT]
    return lines, ratio, cpu_ratio


def _variant_rounds(
    runs: ScaleRuns, repeats: int, variant: str
) -> tuple[list[str], tuple[float, float]]:
    """One variant's rounds, a line each, and the medians of their ratios."""
    small, large = min(runs.populations), max(runs.populations)
    populations = sorted(runs.populations)
    lines = [
        f"{variant}:",
        f"{'round':>5}  {'first':<8}"
        + "".join(f"{f'{urls:,} ev/s':>18}" for urls in populations)
        + f"{'CPU s':>8}{'ratio':>8}{'(CPU)':>7}{'peak RSS MiB':>13}",
    ]
    ratios, cpu_ratios = [], []
    for index in range(repeats):
        run = {urls: runs.rounds(urls, variant)[index] for urls in populations}
        rate = {urls: r["events"] / r["seconds"] for urls, r in run.items()}
        per_cpu = {urls: r["events"] / r["cpu_seconds"] for urls, r in run.items()}
        ratios.append(rate[large] / rate[small])
        cpu_ratios.append(per_cpu[large] / per_cpu[small])
        lines.append(
            f"{index + 1:>5}  {'largest' if index % 2 else 'smallest':<8}"
            + "".join(f"{rate[urls]:>18,.0f}" for urls in populations)
            + f"{run[large]['cpu_seconds']:>8.1f}{ratios[-1]:>8.3f}{cpu_ratios[-1]:>7.3f}"
            f"{run[large]['peak_rss_mib']:>13.0f}"
        )
    ratio, cpu_ratio = float(np.median(ratios)), float(np.median(cpu_ratios))
    lines.append(
        f"{variant}: median over {repeats} rounds: ratio {ratio:.3f}, per CPU second "
        f"{cpu_ratio:.3f} (ratios from {min(ratios):.3f} to {max(ratios):.3f})"
    )
    return lines, (ratio, cpu_ratio)


def _live_lines(runs: ScaleRuns, rate: dict[tuple[int, str], float]) -> list[str]:
    """The live job's rows: its rate, beside the replay's on the same state and log."""
    small = min(runs.live)
    live_rate = {urls: run["events"] / run["seconds"] for urls, run in runs.live.items()}
    lines = [
        "live: frontierflow run --exit-when-idle over a copy of the same state, the same "
        "log produced to the broker (IECA, no speed controller), timed by its first and "
        "last frontier record; records out: its frontier records (the entries and a "
        "tombstone for each fetched page), replay out: the replay's frontier entries",
        f"{'URLs':>12}{'events/s':>10}{'records out':>13}{'replay out':>12}{'CPU s':>7}"
        f"{'vs replay':>11}{'vs smallest':>13}{'(CPU)':>7}",
    ]
    for urls in sorted(runs.live):
        run = runs.live[urls]
        per_cpu = run["events"] / run["cpu_seconds"]
        per_cpu_small = runs.live[small]["events"] / runs.live[small]["cpu_seconds"]
        lines.append(
            f"{urls:>12,}{live_rate[urls]:>10,.0f}{run['entries']:>13,.0f}"
            f"{runs.replayed[urls, DEFAULT]['entries']:>12,.0f}{run['cpu_seconds']:>7.1f}"
            f"{live_rate[urls] / rate[urls, DEFAULT]:>11.3f}"
            f"{live_rate[urls] / live_rate[small]:>13.3f}{per_cpu / per_cpu_small:>7.3f}"
        )
    return lines


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"
