"""`frontierflow bench`: IECA over RocksDB state against a pass-through, in one run.

A generated log of N FetchEvents (each with `outlinks` distinct outlinks drawn from a
population of URLs, with a heavy-tailed popularity as on the web) is replayed twice over,
alternately: once through the pass-through (the same file source and sink, one entry per
event, no state) and once through IECA with RocksDB state. Each run is its own process,
so its peak RSS is its own; medians of the repeats are reported with their ratio.
"""

from __future__ import annotations

import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frontierflow.connectors.logs import FileSink, read_fetch_events
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.strategies.base import EntryFactory
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.urls import host_of


@dataclass(frozen=True, slots=True)
class BenchSetup:
    events: int = 20_000
    outlinks: int = 30
    urls: int = 200_000
    step_size: int = 500
    repeats: int = 3

    def __post_init__(self) -> None:
        if min(self.events, self.outlinks, self.urls, self.step_size, self.repeats) < 1:
            raise ValueError("bench sizes must all be >= 1")
        if self.outlinks > self.urls:
            raise ValueError("more outlinks per page than URLs")


def generate_log(path: Path, setup: BenchSetup, seed: int = 0) -> None:
    """Write the benchmark's FetchEvents as an Avro container file."""
    write_container(path, "FetchEvent", generated_events(setup, seed), codec="null")


def generated_events(setup: BenchSetup, seed: int = 0) -> Iterator[dict[str, object]]:
    rng = np.random.default_rng(seed)
    urls = [f"https://site{i % 997}.example.org/a/{i}.html" for i in range(setup.urls)]
    popularity = 1.0 / np.arange(1, setup.urls + 1) ** 0.8  # Zipf-like link popularity
    popularity /= popularity.sum()
    for i in range(setup.events):
        url = urls[(i * 7919) % setup.urls]
        picks = rng.choice(setup.urls, size=setup.outlinks * 2, p=popularity)
        outlinks = list(dict.fromkeys(urls[j] for j in picks.tolist()))[: setup.outlinks]
        yield FetchEvent(
            url=url,
            fetched_at=1_700_000_000_000 + i,
            status=200,
            fetcher_id="bench",
            host=host_of(url),
            crawl_id="bench",
            outlinks=tuple(outlinks),
            bytes=20_000,
            fetch_ms=120.0,
            echo={"ieca.d": repr(0.3 + (i % 50) / 10)},
        ).to_avro()


def pass_through(log: Path, out: Path, step_size: int) -> int:
    """Decode every event and encode one frontier entry per outlink, as IECA writes one per
    changed link: the same input and output volume with no state and no logic."""
    sink = FileSink(out, out.with_name(out.name + ".dead-letters.jsonl"))
    sink.rewind(None)
    entries = EntryFactory("pass-through")
    batch: list[FrontierEntry] = []
    count = 0
    for _, event, _ in read_fetch_events(log):
        if not isinstance(event, FetchEvent):
            continue
        batch.extend(
            entries.entry_owning_echo(
                child,
                0.0,
                event.crawl_id,
                event.cycle,
                event.url,
                event.fetched_at,
                {"ieca.d": "0.0"},
            )
            for child in event.outlinks
        )
        count += 1
        if count % step_size == 0:
            sink.write(batch, ())
            sink.flush()
            batch = []
    sink.write(batch, ())
    sink.flush()
    sink.close()
    return count


def _worker(kind: str, log: Path, work: Path, step_size: int) -> dict[str, float]:
    """One measured run in this process; returns its figures."""
    started = time.perf_counter()
    if kind == "pass-through":
        events = pass_through(log, work / "out.avro", step_size)
        links = 0
    else:
        stats = replay_log(
            log,
            strategy_name="ieca",
            state_dir=work / "state",
            out=work / "out.avro",
            budget=1_000_000,
            step_size=step_size,
        )
        events, links = stats.events, stats.links
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"events": events, "links": links, "seconds": seconds, "peak_rss_mib": peak_kib / 1024}


def run_bench(setup: BenchSetup, work_dir: Path | None = None) -> str:
    """Generate the log, run both sides `repeats` times alternately, format the report."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        log = root / "events.avro"
        generate_log(log, setup)
        runs: dict[str, list[dict[str, float]]] = {"pass-through": [], "ieca": []}
        for i in range(setup.repeats):
            for kind in runs:
                work = root / f"{kind}-{i}"
                work.mkdir()
                runs[kind].append(_spawn(kind, log, work, setup.step_size))
        return _report(setup, log, runs)


def _spawn(kind: str, log: Path, work: Path, step_size: int) -> dict[str, float]:
    module = "frontierflow.pipelines.bench.engine"
    return spawn_worker(
        [sys.executable, "-m", module, kind, str(log), str(work), str(step_size)], kind
    )


def spawn_worker(cmd: list[str], label: str) -> dict[str, float]:
    """Run one measured run in its own process (so its peak RSS is its own) and return the
    figures it printed as JSON on its last line."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{label} run failed (exit {done.returncode}):\n{tail}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _report(setup: BenchSetup, log: Path, runs: dict[str, list[dict[str, float]]]) -> str:
    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[kind])

    rate = {k: statistics.median(r["events"] / r["seconds"] for r in runs[k]) for k in runs}
    link_rate = statistics.median(r["links"] / r["seconds"] for r in runs["ieca"])
    lines = [
        f"log: {setup.events:,} FetchEvents, {setup.outlinks} outlinks each, "
        f"{setup.urls:,} distinct URLs, {log.stat().st_size / 1e6:.1f} MB Avro; "
        f"step {setup.step_size}; median of {setup.repeats} alternating runs",
        f"{'run':<14}{'events/s':>12}{'link updates/s':>16}{'seconds':>10}{'peak RSS MiB':>14}",
        f"{'pass-through':<14}{rate['pass-through']:>12,.0f}{'-':>16}"
        f"{med('pass-through', 'seconds'):>10.2f}{med('pass-through', 'peak_rss_mib'):>14.0f}",
        f"{'ieca+rocksdb':<14}{rate['ieca']:>12,.0f}{link_rate:>16,.0f}"
        f"{med('ieca', 'seconds'):>10.2f}{med('ieca', 'peak_rss_mib'):>14.0f}",
        f"ratio ieca / pass-through: {rate['ieca'] / rate['pass-through']:.2f} "
        f"(target: ieca >= 5,000 events/s: {'met' if rate['ieca'] >= 5000 else 'NOT met'})",
    ]
    if not all(math.isfinite(v) for v in rate.values()):
        raise RuntimeError("benchmark produced no rate")
    return "\n".join(lines)


if __name__ == "__main__":
    kind_arg, log_arg, work_arg, step_arg = sys.argv[1:5]
    figures = _worker(kind_arg, Path(log_arg), Path(work_arg), int(step_arg))
    print(json.dumps(figures))
