"""`frontierflow bench --scale`: IECA + RocksDB with 1M to 100M URLs already in state.

For each population N the state of N known URLs is built in bulk (`scale_state`: SST
files in the store's own encoding, ingested; timed apart, not part of the rate) and the
same shape of log is replayed over it by IECA with RocksDB state, as `frontierflow replay`
does, each replay in its own process (`scale_worker`). The timed part is the engine's own
work: events whose outlinks are mostly URLs never seen and partly known ones by
popularity. The built files are read once before the runs, as an engine that had built
its state itself would find them in the page cache (`scale_hold.page_in`; `cold_files`
leaves them on the disk). Each `--scale-variants` entry (a set of store options:
`VARIANTS`) gets a state and a run of its own, the variants in turn, so a tuned option is
measured against the default in the same invocation.

With `restart`, each population's default run is done again on a second copy of its
state, SIGKILLed in the middle of a commit interval half way through the log and started
again: the report gives the time from the new process's start to its first committed
step, and whether the state (every key of every family) and the frontier file are those
of the uninterrupted run.

With `hold_files`, each population's default run is also done on a copy of its state
whose SST files another process holds in memory (`scale_hold`), the row `HELD`: the rate
when every read of the built state is a read from the page cache, beside the rate on
what the machine's page cache happens to keep.

With `repeats` R > 1, once every population has been built and run, each variant's replays
are done R - 1 times more, each on a fresh copy of its population's state, the order of
the populations reversed from one round to the next (large, small; small, large; ...). On
a shared machine the same replay's CPU time an event moves by 15-23% from one run to the
next; the ratio of each round's two runs, made one after the other, and the median over
the rounds, are what such drift moves least.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from frontierflow.pipelines.bench.engine import spawn_worker
from frontierflow.pipelines.bench.scale_hold import held_files, page_in
from frontierflow.pipelines.bench.scale_live import live_run
from frontierflow.pipelines.bench.scale_report import ScaleRuns, scale_report
from frontierflow.pipelines.bench.scale_state import (
    DEFAULT,
    HELD,
    VARIANTS,
    ScaleSetup,
    build_state,
    write_scale_log,
)
from frontierflow.pipelines.bench.scale_worker import compare_runs, families
from frontierflow.state.storage.rocksdb import RocksDBStore


def run_scale_bench(setup: ScaleSetup, work_dir: Path | None = None) -> str:
    """Build each population's state, replay its log with each variant, restart the
    default run after a kill, and format the report."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        runs = ScaleRuns(setup.populations, setup.variants + ((HELD,) if setup.hold_files else ()))
        for urls in setup.populations:
            log = _log(root, urls)
            runs.new_urls[urls] = write_scale_log(log, setup.log, urls)
            for variant in setup.variants:
                runs.add(urls, variant, _measure(setup, root, log, urls, variant))
            if setup.hold_files:
                runs.add(urls, HELD, _measure_held(setup, root, log, urls, runs))
            if setup.live_bootstrap:
                runs.live[urls] = _live(setup, root, urls)
            if setup.restart:
                runs.restarts[urls] = _restart(setup, root, log, urls)
        for round_ in range(1, setup.repeats):
            order = sorted(setup.populations, reverse=round_ % 2 == 1)
            for variant in setup.variants:
                for urls in order:
                    again = _again(setup, root, urls, round_, variant)
                    if again["entries"] != runs.replayed[urls, variant]["entries"]:
                        raise RuntimeError(f"{urls:,} URLs: a round's replay wrote other entries")
                    runs.add_again(urls, variant, again)
        return scale_report(setup, runs)


def _log(root: Path, urls: int) -> Path:
    """Where the log replayed over a population's state is written."""
    return root / f"events-{urls}.avro"


def _spec(setup: ScaleSetup, kind: str, variant: str, **fields: Any) -> dict[str, Any]:
    options = replace(VARIANTS[variant], statistics=True)
    return {"kind": kind, "options": asdict(options), "step_size": setup.step_size, **fields}


def _replay_spec(
    setup: ScaleSetup, variant: str, log: Path, state: Path, out: Path, urls: int
) -> dict[str, Any]:
    """The timed replay of `log` over the state at `state` with `variant`'s options."""
    return _spec(
        setup, "replay", variant, log=str(log), state=str(state), out=str(out), budget=urls
    )


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
    if not setup.cold_files:
        page_in(base)
    keep_base = (
        setup.restart
        or setup.repeats > 1
        or (variant == DEFAULT and (setup.live_bootstrap is not None or setup.hold_files))
    )
    state = _copy(base, home / "run", variant) if keep_base else base
    replayed = _run(_replay_spec(setup, variant, log, state, home / "run.avro", urls))
    return {"build": {"seconds": built.seconds, "files": built.files}, "replay": replayed}


def _measure_held(
    setup: ScaleSetup, root: Path, log: Path, urls: int, runs: ScaleRuns
) -> dict[str, dict[str, float]]:
    """The default run again on a fresh copy of the population's state, its SST files
    held in memory by another process for the run (`scale_hold`)."""
    home = root / f"{urls}-{DEFAULT}"
    state = _copy(home / "base", home / "held", DEFAULT)
    spec = _replay_spec(setup, DEFAULT, log, state, home / "held.avro", urls)
    with held_files(state) as held:
        replayed = _run(spec)
    return {
        "build": runs.built[urls, DEFAULT],
        "replay": replayed | {f"held_{k}": v for k, v in held.items()},
    }


def _again(setup: ScaleSetup, root: Path, urls: int, round_: int, variant: str) -> dict[str, float]:
    """A variant's replay again, on a fresh copy of the population's state (removed after:
    only its new files take room, the built ones are hard-linked)."""
    home = root / f"{urls}-{variant}"
    state, out = _copy(home / "base", home / f"again-{round_}", variant), home / "again.avro"
    try:
        return _run(_replay_spec(setup, variant, _log(root, urls), state, out, urls))
    finally:
        shutil.rmtree(state)
        for written in (out, out.with_name(out.name + ".dead-letters.jsonl")):
            written.unlink(missing_ok=True)


def _live(setup: ScaleSetup, root: Path, urls: int) -> dict[str, float]:
    """The live job on a fresh copy of the population's default state (`scale_live`)."""
    assert setup.live_bootstrap is not None
    home = root / f"{urls}-{DEFAULT}"
    state = _copy(home / "base", home / "live", DEFAULT)
    return live_run(setup.live_bootstrap, setup.log, urls, state, setup.step_size)


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
