"""One measured part of `frontierflow bench --scale`, in a process of its own.

Kinds: `replay` (the timed
log replayed by IECA over that state, as `frontierflow replay` does, with the store's
options given: events/s, CPU, peak RSS, RocksDB's statistics and sizes); `killed` (the same
replay, SIGKILLed by itself in the middle of a commit interval); `resumed` (the replay
started again on what the killed one left: when its first step was committed). The
parent passes a JSON object on the command line and reads the figures the worker
prints as JSON on its last line.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from itertools import zip_longest
from pathlib import Path
from typing import Any

import fastavro

from frontierflow.connectors.logs import FileSink, read_fetch_events
from frontierflow.pipelines.bench.engine import cpu_seconds, peak_rss_mib
from frontierflow.pipelines.embedded.engine import Engine, apply_all
from frontierflow.pipelines.embedded.replay import REPLAY_COMMIT_EVERY
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.rocksdb_options import RocksDBOptions

STRATEGY = "ieca"


def families() -> tuple[str, ...]:
    """The families of the bench's store: those IECA's replay opens."""
    return Engine.families_for(build_strategy(STRATEGY, budget=1))


TICKERS = {
    "written": "rocksdb.bytes.written",
    "wal": "rocksdb.wal.bytes",
    "flushed": "rocksdb.flush.write.bytes",
    "compacted": "rocksdb.compact.write.bytes",
    "compaction_read": "rocksdb.compact.read.bytes",
    "data_miss": "rocksdb.block.cache.data.miss",
    "data_hit": "rocksdb.block.cache.data.hit",
    "filter_miss": "rocksdb.block.cache.filter.miss",
    "filter_hit": "rocksdb.block.cache.filter.hit",
    "index_miss": "rocksdb.block.cache.index.miss",
    "bloom_useful": "rocksdb.bloom.filter.useful",
    "bloom_positive": "rocksdb.bloom.filter.full.positive",
    "bloom_true_positive": "rocksdb.bloom.filter.full.true.positive",
    "stall_micros": "rocksdb.stall.micros",
}
"""The RocksDB tickers a replay reports, by the name the report uses."""
PROPERTIES = {
    "cache_usage": "rocksdb.block-cache-usage",
    "cache_pinned": "rocksdb.block-cache-pinned-usage",
    "memtables": "rocksdb.cur-size-all-mem-tables",
    "table_readers": "rocksdb.estimate-table-readers-mem",
    "pending_compaction": "rocksdb.estimate-pending-compaction-bytes",
}
"""RocksDB properties of the strategy's family read at the end of a replay, before close."""
KILL_PHASE = "flushed"
"""Where the killed run dies: a step's outputs flushed, its state not committed."""


def replay(
    spec: dict[str, Any], before_commit: Callable[[str], None] | None = None
) -> dict[str, float]:
    """Replay the spec's log over its state directory, as `replay_log` does (IECA, the
    replay's commit interval, the default host rule), with the spec's store options."""
    options = RocksDBOptions(**spec["options"])
    log, out = Path(spec["log"]), Path(spec["out"])
    strategy = build_strategy(STRATEGY, budget=spec["budget"])
    sink = FileSink(out, out.with_name(out.name + ".dead-letters.jsonl"))
    figures: dict[str, float] = {"open_started_at": time.time()}
    with RocksDBStore(spec["state"], families(), options) as store:
        figures["opened_at"] = time.time()
        engine = Engine(
            strategy,
            store,
            sink,
            source_name=str(log),
            before_commit=before_commit,
            commit_every=REPLAY_COMMIT_EVERY,
        )
        apply_all(engine, read_fetch_events(log, engine.input_position()), spec["step_size"])
        engine.commit_pending()
        sink.close()
        figures |= {name: store.property_int(STRATEGY, p) for name, p in PROPERTIES.items()}
    stats = engine.stats
    figures |= {"events": stats.events, "links": stats.links, "entries": stats.entries}
    tickers = store.statistics()
    figures |= {name: tickers.get(ticker, 0) for name, ticker in TICKERS.items()}
    return figures


def timed_replay(spec: dict[str, Any]) -> dict[str, float]:
    """`replay`, with its wall and CPU time, the peak RSS and the store's size after."""
    started, cpu_started, read_started = time.perf_counter(), cpu_seconds(), _disk_read_bytes()
    figures = replay(spec)
    figures["seconds"] = time.perf_counter() - started
    figures["cpu_seconds"] = cpu_seconds() - cpu_started
    figures["disk_read_bytes"] = _disk_read_bytes() - read_started
    figures["peak_rss_mib"] = peak_rss_mib()
    figures |= directory_bytes(Path(spec["state"]))
    return figures


def killed_replay(spec: dict[str, Any]) -> dict[str, float]:
    """`replay` until the `kill_at`-th step's outputs are flushed, then SIGKILL."""
    seen = 0

    def hook(phase: str) -> None:
        nonlocal seen
        if phase == KILL_PHASE:
            seen += 1
            if seen == spec["kill_at"]:
                os.kill(os.getpid(), signal.SIGKILL)

    replay(spec, hook)
    raise RuntimeError(f"the log ended before step {spec['kill_at']}: no kill")


def resumed_replay(spec: dict[str, Any]) -> dict[str, float]:
    """`replay` on a killed run's state: when (epoch seconds) the store was open and the
    first step was committed, and the WAL it found."""
    first: list[float] = []
    wal = directory_bytes(Path(spec["state"]))["wal_bytes"]

    def hook(phase: str) -> None:
        if phase == "committed" and not first:
            first.append(time.time())

    figures = replay(spec, hook)
    times = ("open_started_at", "opened_at")
    return {"first_commit_at": first[0], "wal_bytes": wal, **{t: figures[t] for t in times}}


def compare_runs(states: tuple[Path, Path], outs: tuple[Path, Path]) -> dict[str, float]:
    """Whether two finished runs hold the same state (every family, key by key) and wrote
    the same frontier (container blocks equal, apart from each file's sync marker)."""
    keys = differences = 0
    with RocksDBStore(states[0], families()) as a, RocksDBStore(states[1], families()) as b:
        for family in a.families:
            for left, right in zip_longest(a.items(family), b.items(family)):
                keys += 1
                differences += left != right
    blocks, block_differences = same_blocks(*outs)
    return {
        "keys": keys,
        "differences": differences,
        "blocks": blocks,
        "block_differences": block_differences,
    }


def same_blocks(left: Path, right: Path) -> tuple[int, int]:
    """(container blocks, blocks that differ) of two frontier files, compared block by
    block as bytes (a missing block differs)."""
    blocks = differences = 0
    with left.open("rb") as a, right.open("rb") as b:
        pairs = zip_longest(fastavro.block_reader(a), fastavro.block_reader(b))
        for x, y in pairs:
            blocks += 1
            same = x is not None and y is not None and x.num_records == y.num_records
            differences += not (same and x.bytes_.getvalue() == y.bytes_.getvalue())  # type: ignore[union-attr]
    return blocks, differences


def directory_bytes(path: Path) -> dict[str, float]:
    """Bytes of the SST files, of the write-ahead logs and of everything in a state
    directory."""
    sst = wal = total = 0
    for entry in os.scandir(path):
        size = entry.stat().st_size
        total += size
        if entry.name.endswith(".sst"):
            sst += size
        elif entry.name.endswith(".log"):
            wal += size
    return {"sst_bytes": sst, "wal_bytes": wal, "dir_bytes": total}


def _disk_read_bytes() -> float:
    """Bytes this process has had read from a block device (Linux's `/proc/self/io`
    `read_bytes`: reads the page cache answered are not in it); 0 where not kept."""
    try:
        with open("/proc/self/io") as io:
            fields = dict(line.split(": ") for line in io.read().splitlines())
    except OSError:
        return 0.0
    return float(fields.get("read_bytes", 0))


KINDS: dict[str, Callable[[dict[str, Any]], dict[str, float]]] = {
    "replay": timed_replay,
    "killed": killed_replay,
    "resumed": resumed_replay,
}


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    print(json.dumps(KINDS[request["kind"]](request)))
