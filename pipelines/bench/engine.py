"""`frontierflow bench`: IECA over RocksDB state against a pass-through and a raw ceiling.

A generated log of N FetchEvents (each with `outlinks` distinct outlinks drawn from a
population of URLs, with a heavy-tailed popularity as on the web) is replayed three ways,
in turn: by the raw ceiling (fastavro alone: read the log, write one full FrontierEntry per
outlink, no project code), by the pass-through (the project's file source and sink, one
entry per outlink, no state) and by IECA with RocksDB state. Each run is its own process,
so its peak RSS is its own; medians of the repeats are reported with each row's ratio to
the ceiling.
"""

from __future__ import annotations

import contextlib
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

from frontierflow.pipelines.bench.baselines import pass_through, raw_ceiling
from frontierflow.pipelines.embedded.replay import replay_log
from frontierflow.pipelines.speed.settings import DEFAULT_SPEED_CONTROLLER, settings_for
from frontierflow.pipelines.ui import LiveSummary, UiServer
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.urls import host_of


@dataclass(frozen=True, slots=True)
class BenchSetup:
    events: int = 20_000
    outlinks: int = 30
    urls: int = 200_000
    step_size: int = 500
    repeats: int = 3
    ui: bool = False
    """Also run IECA with the operator's page on and polled (`ieca+page`)."""
    links: str = "zipf"
    """How outlinks are drawn from the population: `zipf` (by popularity, `LinkPopularity`)
    or `uniform` (every URL alike: over a large population nearly every link is to a URL
    never seen before, as early in a broad crawl; the way to put millions of distinct URLs
    into state)."""

    def __post_init__(self) -> None:
        if min(self.events, self.outlinks, self.urls, self.step_size, self.repeats) < 1:
            raise ValueError("bench sizes must all be >= 1")
        if self.links not in LINK_DRAWS:
            raise ValueError(f"links: one of {', '.join(LINK_DRAWS)}, got {self.links!r}")
        if self.outlinks > self.urls:
            raise ValueError("more outlinks per page than URLs")


LINK_DRAWS = ("zipf", "uniform")
ZIPF_EXPONENT = 0.8
"""Link popularity: the URL of rank r (1-based) is drawn with weight r^-0.8."""
HOSTS = 997
DRAW_BATCH = 4096
"""Events whose outlinks are drawn in one vectorised call."""
FIRST_FETCH_MS = 1_700_000_000_000


def bench_url(index: int) -> str:
    """The URL of popularity rank `index` (0-based) in a generated log."""
    return f"https://site{index % HOSTS}.example.org/a/{index}.html"


class LinkPopularity:
    """Zipf-like popularity over URL ranks 0..n-1, sampled through the inverse CDF.

    A draw is a binary search of the cumulative weights (`searchsorted`): O(log n), against
    O(n) per call for `numpy.random.Generator.choice(p=...)`. The uniforms of a batch are
    searched in sorted order (numpy's search then starts from the previous hit, which keeps
    a 10M-entry table's cache misses low) and put back in draw order. The draws equal
    `choice(n, size, p=weights / weights.sum())` on the same generator state.
    """

    def __init__(self, urls: int, exponent: float = ZIPF_EXPONENT) -> None:
        if urls < 1:
            raise ValueError("a popularity needs at least one URL")
        weights = np.arange(1, urls + 1, dtype=np.float64) ** -exponent
        weights /= weights.sum()
        self._cdf = weights.cumsum()
        self._cdf /= self._cdf[-1]

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` ranks, independent, each with its popularity's probability."""
        uniforms = rng.random(size)
        order = np.argsort(uniforms, kind="stable")
        ranks = np.empty(size, dtype=np.int64)
        ranks[order] = self._cdf.searchsorted(uniforms[order], side="right")
        return ranks


def bench_event(
    url: str, i: int, outlinks: list[str], crawl_id: str, distance: float
) -> dict[str, object]:
    """The bench's `i`-th FetchEvent as an Avro record: a 200 of 20 kB fetched at
    `FIRST_FETCH_MS + i`, IECA's distance of the page echoed."""
    return FetchEvent(
        url=url,
        fetched_at=FIRST_FETCH_MS + i,
        status=200,
        fetcher_id="bench",
        host=host_of(url),
        crawl_id=crawl_id,
        outlinks=tuple(outlinks),
        bytes=20_000,
        fetch_ms=120.0,
        echo={"ieca.d": repr(distance)},
    ).to_avro()


def generate_log(path: Path, setup: BenchSetup, seed: int = 0) -> int:
    """Write the benchmark's FetchEvents as an Avro container file; return the number of
    distinct URLs in it (fetched pages and outlinks)."""
    seen = np.zeros(setup.urls, dtype=np.bool_)
    write_container(path, "FetchEvent", generated_events(setup, seed, seen=seen), codec="null")
    return int(np.count_nonzero(seen))


def generated_events(
    setup: BenchSetup, seed: int = 0, *, seen: np.ndarray | None = None
) -> Iterator[dict[str, object]]:
    """The benchmark's FetchEvents as Avro dicts: event i fetches URL (i·7919) mod n and
    links to `outlinks` distinct URLs drawn by popularity, or uniformly with `links=uniform`
    (the first distinct ones of 2·outlinks draws). Marks the ranks it uses in `seen` when
    given."""
    rng = np.random.default_rng(seed)
    popularity = LinkPopularity(setup.urls) if setup.links == "zipf" else None
    draws = setup.outlinks * 2
    for first in range(0, setup.events, DRAW_BATCH):
        count = min(DRAW_BATCH, setup.events - first)
        if popularity is None:
            picks = rng.integers(0, setup.urls, size=(count, draws))
        else:
            picks = popularity.draw(rng, count * draws).reshape(count, draws)
        for i, row in zip(range(first, first + count), picks.tolist(), strict=True):
            page = (i * 7919) % setup.urls
            linked = list(dict.fromkeys(row))[: setup.outlinks]
            if seen is not None:
                seen[page] = True
                seen[linked] = True
            yield bench_event(
                bench_url(page), i, [bench_url(j) for j in linked], "bench", 0.3 + (i % 50) / 10
            )


CEILING_TARGET = 0.6
"""IECA + RocksDB events/s over the raw ceiling's, measured in the same run."""

RUNS = ("raw", "pass-through", "ieca")
"""What `frontierflow bench` measures, in the order each repeat runs them."""
PAGE_RUN = "ieca+page"
"""With `--ui`: IECA again, with the operator's page served and polled once a second."""
JOB_RUN = "ieca+speed"
"""IECA with the default crawl-speed controller too: what `frontierflow replay` and
`frontierflow run` do when the command names none (`bench kafka` compares the two)."""
ROW_NAMES = {
    "raw": "raw fastavro",
    "pass-through": "pass-through",
    "ieca": "ieca+rocksdb",
    PAGE_RUN: "  +page open",
    JOB_RUN: "ieca+speed",
}
PAGE_TARGET = 0.95
"""IECA's events/s with the page open over without it."""


def _worker(kind: str, log: Path, work: Path, step_size: int) -> dict[str, float]:
    """One measured run in this process; returns its figures."""
    started, cpu_started = time.perf_counter(), cpu_seconds()
    links = 0
    if kind == "raw":
        events, entries = raw_ceiling(log, work / "out.avro", step_size)
    elif kind == "pass-through":
        events, entries = pass_through(log, work / "out.avro", step_size)
    elif kind in ("ieca", PAGE_RUN, JOB_RUN):
        with _open_page(kind == PAGE_RUN) as observer:
            stats = replay_log(
                log,
                strategy_name="ieca",
                state_dir=work / "state",
                out=work / "out.avro",
                budget=1_000_000,
                step_size=step_size,
                observer=observer,
                speed=settings_for(DEFAULT_SPEED_CONTROLLER) if kind == JOB_RUN else None,
            )
        events, links, entries = stats.events, stats.links, stats.entries
    else:
        known = ", ".join((*RUNS, PAGE_RUN, JOB_RUN))
        raise ValueError(f"unknown bench run {kind!r}; known: {known}")
    seconds = time.perf_counter() - started
    return {
        "events": events,
        "entries": entries,
        "links": links,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds() - cpu_started,
        "peak_rss_mib": peak_rss_mib(),
    }


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB: Linux's `VmHWM`, the high-water mark of its
    own address space. Not `ru_maxrss`: Linux carries into it, across an exec, the peak of
    the address space the exec replaced, and Python's `subprocess` starts a program from a
    vfork of its parent, so a worker started by a bench process holding a GB would report
    that GB as its own. `ru_maxrss` only where `/proc` is not."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextlib.contextmanager
def _open_page(on: bool) -> Iterator[LiveSummary | None]:
    """With `on`: the operator's page served on a free loopback port and, in a process of
    its own as a browser would be, a client fetching its summary every `PAGE_POLL_S`;
    else nothing."""
    if not on:
        yield None
        return
    summary = LiveSummary(command="replay", strategy="ieca", judges_pages=False)
    server = UiServer(summary, 0).start()
    client = subprocess.Popen(
        [sys.executable, "-c", PAGE_CLIENT, server.url + "api/summary", str(PAGE_POLL_S)],
        stdout=subprocess.DEVNULL,
    )
    try:
        yield summary
    finally:
        client.terminate()
        client.wait()
        server.close()


PAGE_CLIENT = """
import sys, threading, urllib.request
url, every = sys.argv[1], float(sys.argv[2])
while not threading.Event().wait(every):  # the page's pace, not a wait for a result
    with urllib.request.urlopen(url, timeout=10) as answer:
        answer.read()
"""
"""What an open page does: GET the summary at the page's pace, until terminated."""


PAGE_POLL_S = 1.0
"""How often the operator's page asks for its summary (`POLL_MS` in its app.js)."""


@dataclass(frozen=True, slots=True)
class BenchLog:
    """A generated log and what it holds."""

    path: Path
    events: int
    distinct_urls: int

    @property
    def megabytes(self) -> float:
        return self.path.stat().st_size / 1e6


def run_bench(setup: BenchSetup, work_dir: Path | None = None) -> str:
    """Generate the log, run every kind `repeats` times in turn, format the report."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        path = root / "events.avro"
        log = BenchLog(path, setup.events, generate_log(path, setup))
        kinds = (*RUNS, PAGE_RUN) if setup.ui else RUNS
        runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
        for i in range(setup.repeats):
            for kind in kinds:
                work = root / f"{kind}-{i}"
                work.mkdir()
                runs[kind].append(spawn_bench_worker(kind, path, work, setup.step_size))
        return _report(setup, log, runs)


def spawn_bench_worker(kind: str, log: Path, work: Path, step_size: int) -> dict[str, float]:
    """One run of `kind` (raw, pass-through, ieca) in a process of its own."""
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


def _report(setup: BenchSetup, log: BenchLog, runs: dict[str, list[dict[str, float]]]) -> str:
    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[kind])

    rate = {k: statistics.median(r["events"] / r["seconds"] for r in runs[k]) for k in runs}
    if not all(math.isfinite(v) and v > 0 for v in rate.values()):
        raise RuntimeError("benchmark produced no rate")
    link_rate = statistics.median(r["links"] / r["seconds"] for r in runs["ieca"])
    ceiling = rate["raw"]
    cpu_rate = {k: statistics.median(r["events"] / r["cpu_seconds"] for r in runs[k]) for k in runs}
    lines = [
        f"log: {log.events:,} FetchEvents, {setup.outlinks} outlinks each, "
        f"{setup.urls:,} URLs in the population ({log.distinct_urls:,} distinct in the log), "
        f"{log.megabytes:.1f} MB Avro; step {setup.step_size}; "
        f"median of {setup.repeats} run(s) of each, in turn",
        f"{'run':<14}{'events':>9}{'events/s':>10}{'entries':>10}{'link updates/s':>16}"
        f"{'seconds':>9}{'CPU s':>7}{'peak RSS MiB':>14}{'vs ceiling':>12}{'(CPU)':>7}",
    ]
    for kind in runs:
        links = f"{link_rate:,.0f}" if kind == "ieca" else "-"
        lines.append(
            f"{ROW_NAMES[kind]:<14}{med(kind, 'events'):>9,.0f}{rate[kind]:>10,.0f}"
            f"{med(kind, 'entries'):>10,.0f}{links:>16}{med(kind, 'seconds'):>9.2f}"
            f"{med(kind, 'cpu_seconds'):>7.2f}{med(kind, 'peak_rss_mib'):>14.0f}"
            f"{rate[kind] / ceiling:>12.3f}{cpu_rate[kind] / cpu_rate['raw']:>7.3f}"
        )
    cpu_ratio = cpu_rate["ieca"] / cpu_rate["raw"]
    lines += [
        "raw fastavro: the ceiling, fastavro alone reading the log and writing one full "
        "FrontierEntry per outlink (container blocks per step), no project code; "
        "vs ceiling: events/s over the ceiling's; (CPU): events per CPU second over the "
        "ceiling's (the process's user + system time: steadier on a shared machine)",
        f"ratio ieca / pass-through: {rate['ieca'] / rate['pass-through']:.2f}; "
        f"ieca / ceiling: {rate['ieca'] / ceiling:.3f} (target >= {CEILING_TARGET}: "
        f"{'met' if rate['ieca'] / ceiling >= CEILING_TARGET else 'NOT met'}); "
        f"per CPU second: {cpu_ratio:.3f} "
        f"({'met' if cpu_ratio >= CEILING_TARGET else 'NOT met'})",
    ]
    if PAGE_RUN in runs:
        page = rate[PAGE_RUN] / rate["ieca"]
        cpu = cpu_rate
        page_cpu = cpu[PAGE_RUN] / cpu["ieca"]
        lines += [
            f"events per CPU second (the process, all threads): ieca {cpu['ieca']:,.0f}, "
            f"with the page open {cpu[PAGE_RUN]:,.0f}",
            f"ratio with the operator's page open / without: events/s {page:.3f}, "
            f"events per CPU second {page_cpu:.3f} (target >= {PAGE_TARGET})",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    kind_arg, log_arg, work_arg, step_arg = sys.argv[1:5]
    figures = _worker(kind_arg, Path(log_arg), Path(work_arg), int(step_arg))
    print(json.dumps(figures))
