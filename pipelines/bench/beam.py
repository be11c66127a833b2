"""`frontierflow bench-beam`: one log through the embedded engine and the Beam runners.

One generated log (as `frontierflow bench` makes it) is replayed with IECA by the embedded
engine (RocksDB state) and by the Beam replay pipeline on the local FnApiRunner, on Prism
and on Flink (embedded mini cluster, LOOPBACK, parallelism 2), each run in a process of its
own. Medians of the repeats are reported with each runner's ratio to the embedded engine,
and, beside the wall-clock rate, the rate net of the runner's fixed cost (start-up and
teardown, measured once on a ten-event log).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from frontierflow.pipelines.bench.engine import BenchSetup, generate_log, spawn_worker

RUNNERS = ("embedded", "fnapi", "prism", "flink")
BUDGET = 1_000_000
STEP_SIZE = 500
FIXED_COST_EVENTS = 10
# the infra scripts that build Prism and resolve the Flink job server, when run from the repo
INFRA = Path(__file__).resolve().parent.parent / "infra"
SCRIPT_TIMEOUT_S = 1800


def beam_args(
    runner: str, prism_location: str | None, flink_jar: str | None, flink_conf_dir: str | None
) -> list[str]:
    """The Beam pipeline options of a runner of the benchmark (not `embedded`)."""
    if runner == "fnapi":
        return ["--runner=FnApiRunner"]
    if runner == "prism":
        return [
            "--runner=PrismRunner",
            f"--prism_location={prism_location}",
            "--environment_type=LOOPBACK",
        ]
    if runner == "flink":
        java_home = os.environ.get("JAVA_HOME")
        args = [
            "--runner=FlinkRunner",
            "--flink_master=[local]",
            "--flink_version=1.19",
            f"--flink_job_server_jar={flink_jar}",
            "--environment_type=LOOPBACK",
            "--parallelism=2",
        ]
        if flink_conf_dir:
            args.append(f"--flink_conf_dir={flink_conf_dir}")
        if java_home:
            args.append(f"--job_server_java_launcher={os.path.join(java_home, 'bin', 'java')}")
        return args
    raise ValueError(f"unknown runner {runner!r}; known: {', '.join(RUNNERS)}")


def _worker(runner: str, log: Path, work: Path, args: list[str]) -> dict[str, float]:
    """One measured replay in this process; returns its figures."""
    from frontierflow.pipelines.beam.replay import run_beam_replay
    from frontierflow.pipelines.embedded.replay import replay_log

    started = time.perf_counter()
    if runner == "embedded":
        stats = replay_log(
            log,
            strategy_name="ieca",
            state_dir=work / "state",
            out=work / "out.avro",
            budget=BUDGET,
            step_size=STEP_SIZE,
        )
        seconds = time.perf_counter() - started
        events = stats.events
        states = _embedded_states(work / "state")
    else:
        run_beam_replay(
            log, strategy_name="ieca", out_prefix=str(work / "out"), budget=BUDGET, beam_args=args
        )
        seconds = time.perf_counter() - started
        events = _log_events(log)
        states = sum(_line_count(f) for f in work.glob("out-state*"))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "events": events,
        "states": states,
        "seconds": seconds,
        "peak_rss_mib": peak_kib / 1024,
    }


def _embedded_states(state_dir: Path) -> int:
    from frontierflow.state.rocksdb import RocksDBStore

    with RocksDBStore(state_dir, ("ieca", "crawled")) as store:
        return sum(1 for _ in store.items("ieca"))


def _log_events(log: Path) -> int:
    from frontierflow.connectors.logs import read_fetch_events
    from frontierflow.schemas.records import FetchEvent

    return sum(1 for _, item, _ in read_fetch_events(log) if isinstance(item, FetchEvent))


def _line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def _spawn(runner: str, log: Path, work: Path, args: list[str]) -> dict[str, float]:
    module = "frontierflow.pipelines.bench.beam"
    cmd = [sys.executable, "-m", module, runner, str(log), str(work), json.dumps(args)]
    return spawn_worker(cmd, runner)


def _infra_path(script: str) -> tuple[str | None, str]:
    """Run an infra script that prints one path; (path, note)."""
    path = INFRA / script
    if not path.is_file():
        return None, f"no {path.relative_to(INFRA.parent)} next to the package"
    try:
        done = subprocess.run(
            ["bash", str(path)],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"infra/{script} took over {SCRIPT_TIMEOUT_S} s"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) != 1 or not Path(lines[0]).is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"infra/{script} failed: {last}"
    return lines[0], f"from infra/{script}"


def run_beam_bench(
    events: int = 2_000,
    runners: Sequence[str] = RUNNERS,
    prism_location: str | None = None,
    flink_jar: str | None = None,
    flink_conf_dir: str | None = None,
    repeats: int = 3,
    *,
    outlinks: int = 30,
    work_dir: Path | None = None,
) -> str:
    """Generate the log, run every runner `repeats` times in turn, format the report.

    Prism and Flink locations that are not given come from the repo's infra scripts when
    they are there; a runner whose binary or jar cannot be had is skipped with a note.
    """
    unknown = [r for r in runners if r not in RUNNERS]
    if unknown:
        raise ValueError(f"unknown runners {unknown}; known: {', '.join(RUNNERS)}")
    if events < 1 or repeats < 1:
        raise ValueError("events and repeats must be >= 1")
    notes: list[str] = []
    if "prism" in runners and prism_location is None:
        prism_location, note = _infra_path("prism/build.sh")
        notes.append(f"prism: {note}")
    if "flink" in runners and flink_jar is None:
        flink_jar, note = _infra_path("flink/fetch-job-server.sh")
        notes.append(f"flink: {note}")
    if "flink" in runners and flink_conf_dir is None and (INFRA / "flink").is_dir():
        flink_conf_dir = str(INFRA / "flink")
    active: list[str] = []
    for runner in runners:
        if (runner == "prism" and not prism_location) or (runner == "flink" and not flink_jar):
            notes.append(f"{runner}: skipped, no {'binary' if runner == 'prism' else 'jar'}")
        else:
            active.append(runner)
    setup = BenchSetup(events=events, outlinks=outlinks, repeats=repeats)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        log, small = root / "events.avro", root / "small.avro"
        generate_log(log, setup)
        generate_log(small, BenchSetup(events=FIXED_COST_EVENTS, outlinks=outlinks, repeats=1))
        args = {
            r: [] if r == "embedded" else beam_args(r, prism_location, flink_jar, flink_conf_dir)
            for r in active
        }
        runs: dict[str, list[dict[str, float]]] = {r: [] for r in active}
        fixed: dict[str, float] = {}
        for r in active:
            work = root / f"{r}-fixed"
            work.mkdir()
            fixed[r] = _spawn(r, small, work, args[r])["seconds"]
        for i in range(repeats):
            for r in active:
                work = root / f"{r}-{i}"
                work.mkdir()
                runs[r].append(_spawn(r, log, work, args[r]))
        size_mb = log.stat().st_size / 1e6
    header = (
        f"log: {events:,} FetchEvents, {outlinks} outlinks each, {size_mb:.1f} MB Avro; "
        f"IECA; median of {repeats} run(s) per runner, each in its own process"
    )
    return _report(header, runs, fixed, notes)


def _report(
    header: str,
    runs: dict[str, list[dict[str, float]]],
    fixed: dict[str, float],
    notes: list[str],
) -> str:
    names = {
        "embedded": "embedded",
        "fnapi": "beam-fnapi",
        "prism": "beam-prism",
        "flink": "beam-flink",
    }
    lines = [
        header,
        f"{'runner':<12}{'events/s':>10}{'ratio':>8}{'seconds':>9}{'fixed s':>9}"
        f"{'net ev/s':>10}{'net ratio':>10}{'states':>8}{'py RSS MiB':>12}",
    ]
    rate: dict[str, float] = {}
    net: dict[str, float] = {}
    for r, figures in runs.items():
        seconds = statistics.median(f["seconds"] for f in figures)
        rate[r] = statistics.median(f["events"] / f["seconds"] for f in figures)
        busy = seconds - fixed[r]
        net[r] = figures[0]["events"] / busy if busy > 0 else float("nan")
    base, base_net = rate.get("embedded"), net.get("embedded")
    for r, figures in runs.items():
        ratio = f"{rate[r] / base:.3f}" if base else "-"
        net_ratio = f"{net[r] / base_net:.3f}" if base_net else "-"
        states = {int(f["states"]) for f in figures}
        lines.append(
            f"{names[r]:<12}{rate[r]:>10,.0f}{ratio:>8}"
            f"{statistics.median(f['seconds'] for f in figures):>9.2f}{fixed[r]:>9.2f}"
            f"{net[r]:>10,.0f}{net_ratio:>10}"
            f"{'/'.join(str(s) for s in sorted(states)):>8}"
            f"{statistics.median(f['peak_rss_mib'] for f in figures):>12.0f}"
        )
    lines.append(
        "ratio: events/s over the embedded engine's; fixed s: the same runner on a "
        f"{FIXED_COST_EVENTS}-event log (start-up, teardown); "
        "net: events over (seconds - fixed s); "
        "states: URL states written (equal across runners); py RSS: the Python process only "
        "(not Prism's or Flink's own processes)"
    )
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


if __name__ == "__main__":
    runner_arg, log_arg, work_arg, args_arg = sys.argv[1:5]
    worker_args: list[str] = json.loads(args_arg)
    print(json.dumps(_worker(runner_arg, Path(log_arg), Path(work_arg), worker_args)))
