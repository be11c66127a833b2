"""`frontierflow bench --scale`: IECA + RocksDB with 1M to 100M URLs already in state.

For each population N the state of N known URLs is built in bulk (`scale_state`: SST
files in the store's own encoding, ingested; timed apart, not part of the rate) and the
same shape of log is replayed over it by IECA with RocksDB state, as `frontierflow replay`
does, each replay in its own process (`scale_worker`). The timed part is the engine's own
work: events whose outlinks are mostly URLs never seen and partly known ones by
popularity. Each `--scale-variants` entry (a set of store options: `VARIANTS`) gets a
state and a run of its own, the variants in turn, so a tuned option is measured against
the default in the same invocation.

With `restart`, each population's default run is done again on a second copy of its
state, SIGKILLed in the middle of a commit interval half way through the log and started
again: the report gives the time from the new process's start to its first committed
step, and whether the state (every key of every family) and the frontier file are those
of the uninterrupted run.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from frontierflow.pipelines.bench.engine import spawn_worker
from frontierflow.pipelines.bench.scale_report import DEFAULT, ScaleRuns, scale_report
from frontierflow.pipelines.bench.scale_state import (
    ScaleLogSetup,
    build_state,
    unfetched_count,
    write_scale_log,
)
from frontierflow.pipelines.bench.scale_worker import compare_runs, families
from frontierflow.pipelines.embedded.replay import REPLAY_COMMIT_EVERY
from frontierflow.state.storage.bulk import SST_FILE_BYTES
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.rocksdb_options import RocksDBOptions

_MIB = 1024 * 1024

VARIANTS: dict[str, RocksDBOptions] = {
    DEFAULT: RocksDBOptions(),
    "before": RocksDBOptions(
        block_cache_size=64 * _MIB,
        index_and_filters_in_cache=False,
        partitioned_index_and_filters=False,
        memtable_budget=0,
        max_total_wal_size=0,
        meta_write_buffer_size=64 * _MIB,
        bottommost_compression="lz4",
    ),
    "filters-outside-cache": RocksDBOptions(
        index_and_filters_in_cache=False, partitioned_index_and_filters=False
    ),
    "unpartitioned": RocksDBOptions(partitioned_index_and_filters=False),
    "no-bloom": RocksDBOptions(bloom_filter_bits_per_key=0),
    "memtables-outside-cache": RocksDBOptions(memtable_budget=0),
    "cache-256m": RocksDBOptions(block_cache_size=256 * _MIB),
    "zstd-last-level": RocksDBOptions(bottommost_compression="zstd"),
    "no-wal-bound": RocksDBOptions(max_total_wal_size=0),
    "block-16k": RocksDBOptions(block_size=16 * 1024),
}
"""Store options the bench can compare, by name: `default` is `RocksDBOptions()`,
`before` the options the store had before it was tuned for 100M URLs, the others the
default with one choice undone or changed."""


@dataclass(frozen=True, slots=True)
class ScaleSetup:
    populations: tuple[int, ...] = (1_000_000, 10_000_000)
    log: ScaleLogSetup = field(default_factory=ScaleLogSetup)
    step_size: int = 500
    variants: tuple[str, ...] = (DEFAULT,)
    restart: bool = True
    sst_file_bytes: int = SST_FILE_BYTES

    def __post_init__(self) -> None:
        if len(self.populations) < 2:
            raise ValueError("--scale needs at least two URL populations to compare")
        if len(set(self.populations)) != len(self.populations):
            raise ValueError(f"URL populations repeat: {self.populations}")
        fetchable = unfetched_count(min(self.populations))
        if self.log.events > fetchable:
            raise ValueError(
                f"{min(self.populations):,} URLs in state leave {fetchable:,} to fetch: "
                f"--events at most {fetchable:,}"
            )
        if self.step_size < 1:
            raise ValueError(f"--step-size must be >= 1, got {self.step_size}")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or DEFAULT not in self.variants:
            raise ValueError(
                f"--scale-variants: {DEFAULT} and any of {', '.join(VARIANTS)}; "
                f"got {', '.join(self.variants)}"
            )
        if len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants repeat: {self.variants}")
        steps = -(-self.log.events // self.step_size)
        if self.restart and steps < 2 * REPLAY_COMMIT_EVERY:
            raise ValueError(
                f"the restart needs a log of at least {2 * REPLAY_COMMIT_EVERY} steps "
                f"(--events >= {2 * REPLAY_COMMIT_EVERY} x --step-size), or --no-restart"
            )

    @property
    def kill_at(self) -> int:
        """The step in whose commit interval the killed run dies: half way through the
        log, three steps past a commit (so a restart redoes three steps)."""
        steps = -(-self.log.events // self.step_size)
        middle = steps // 2 // REPLAY_COMMIT_EVERY * REPLAY_COMMIT_EVERY
        return middle + min(3, REPLAY_COMMIT_EVERY - 1)


def run_scale_bench(setup: ScaleSetup, work_dir: Path | None = None) -> str:
    """Build each population's state, replay its log with each variant, restart the
    default run after a kill, and format the report."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        runs = ScaleRuns(setup.populations, setup.variants)
        for urls in setup.populations:
            log = root / f"events-{urls}.avro"
            runs.new_urls[urls] = write_scale_log(log, setup.log, urls)
            for variant in setup.variants:
                runs.add(urls, variant, _measure(setup, root, log, urls, variant))
            if setup.restart:
                runs.restarts[urls] = _restart(setup, root, log, urls)
        return scale_report(setup, runs)


def _spec(setup: ScaleSetup, kind: str, variant: str, **fields: Any) -> dict[str, Any]:
    options = replace(VARIANTS[variant], statistics=True)
    return {"kind": kind, "options": asdict(options), "step_size": setup.step_size, **fields}


def _run(spec: dict[str, Any]) -> dict[str, float]:
    module = "frontierflow.pipelines.bench.scale_worker"
    return spawn_worker([sys.executable, "-m", module, json.dumps(spec)], spec["kind"])


def _measure(
    setup: ScaleSetup, root: Path, log: Path, urls: int, variant: str
) -> dict[str, dict[str, float]]:
    """The population's state built with `variant`'s options, then the timed replay on
    it (on a checkpoint of it when the restart will need the state again)."""
    home = root / f"{urls}-{variant}"
    base = home / "base"
    options = VARIANTS[variant]
    built = build_state(base, urls, options, home / "sst", setup.sst_file_bytes)
    state = _copy(base, home / "run", variant) if setup.restart else base
    replayed = _run(
        _spec(
            setup,
            "replay",
            variant,
            log=str(log),
            state=str(state),
            out=str(home / "run.avro"),
            budget=urls,
        )
    )
    return {"build": {"seconds": built.seconds, "files": built.files}, "replay": replayed}


def _restart(setup: ScaleSetup, root: Path, log: Path, urls: int) -> dict[str, float]:
    """The default run again on a fresh copy of the state: killed at `kill_at`, started
    again (time to its first commit), then compared with the uninterrupted run."""
    home = root / f"{urls}-{DEFAULT}"
    state, out = _copy(home / "base", home / "killed", DEFAULT), home / "killed.avro"
    run = {"log": str(log), "state": str(state), "out": str(out), "budget": urls}
    try:
        _run(_spec(setup, "killed", DEFAULT, kill_at=setup.kill_at, **run))
    except RuntimeError as exc:
        if "exit -9" not in str(exc):
            raise
    else:
        raise RuntimeError("the killed run finished: it was never killed")
    spawned = time.time()
    resumed = _run(_spec(setup, "resumed", DEFAULT, **run))
    compared = compare_runs((home / "run", state), (home / "run.avro", out))
    return {
        "to_open_start": resumed["open_started_at"] - spawned,
        "to_open": resumed["opened_at"] - spawned,
        "to_first_commit": resumed["first_commit_at"] - spawned,
        "wal_bytes": resumed["wal_bytes"],
        **compared,
    }


def _copy(base: Path, to: Path, variant: str) -> Path:
    """A checkpoint of the state at `base` in `to` (its SST files hard-linked)."""
    with RocksDBStore(base, families(), VARIANTS[variant]) as store:
        store.checkpoint(to)
    return to


def parse_populations(values: Sequence[str]) -> tuple[int, ...]:
    """`--scale-urls 1M,100M` (or 1000000, 1_000_000, 10k) as integers."""
    units = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
    out = []
    for value in values:
        text = value.strip().replace("_", "").lower()
        scale = units.get(text[-1:], 1)
        number = text[:-1] if scale > 1 else text
        try:
            out.append(int(number) * scale)
        except ValueError as exc:
            raise ValueError(
                f"--scale-urls takes whole numbers (with k or M), got {','.join(values)}"
            ) from exc
    return tuple(out)
