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
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from frontierflow.pipelines.bench.engine import BenchSetup, generate_log, peak_rss_mib, spawn_worker
from frontierflow.pipelines.bench.graph_log import write_graph_log

RUNNERS = ("embedded", "fnapi", "prism", "flink", "flink-cluster", "flink-cluster-2")
"""What bench-beam can run; the two cluster runners need a running session cluster
(`infra/flink/cluster.sh start`, `--flink-master`), the second also the SDK worker pool of
`infra/flink/worker_pool.py` (`--worker-pool`): parallelism 2 on two TaskManagers."""
DEFAULT_RUNNERS = ("embedded", "fnapi", "prism", "flink")
FLINK_PARALLELISM = {"flink": 2, "flink-cluster": 1, "flink-cluster-2": 2}
"""The parallelism `beam_args` gives each Flink runner's jobs."""
BUDGET = 1_000_000
STEP_SIZE = 500
FIXED_COST_EVENTS = 10
# the infra scripts that build Prism and resolve the Flink job server, when run from the repo
INFRA = Path(__file__).resolve().parent.parent.parent / "infra"
SCRIPT_TIMEOUT_S = 1800
FLINK_VERSION = "1.19"
FLINK_RUNNER_FALLBACK_VERSION = "2.62.0"
"""infra/flink/fetch-job-server.sh's fallback when the pinned Beam's runner is not served."""


def beam_args(
    runner: str,
    prism_location: str | None,
    flink_jar: str | None,
    flink_conf_dir: str | None,
    flink_master: str | None = None,
    worker_pool: str | None = None,
    job_endpoint: str | None = None,
) -> list[str]:
    """The Beam pipeline options of a runner of the benchmark (not `embedded`). The
    cluster runners expect a session cluster of `infra/flink/cluster.sh`, which has the job
    server's class path: their jobs upload no jars (`CLUSTER_CLASSPATH`); with
    `job_endpoint` they go to a job server kept running (`infra/flink/job-server.sh`)
    instead of one started from `flink_jar` for the job."""
    if runner in ("flink-cluster", "flink-cluster-2"):
        from frontierflow.pipelines.beam.options import CLUSTER_CLASSPATH  # imports Beam

        cluster = [
            "--runner=FlinkRunner",
            f"--flink_master={flink_master}",
            f"--flink_version={FLINK_VERSION}",
            f"--job_endpoint={job_endpoint}"
            if job_endpoint
            else f"--flink_job_server_jar={flink_jar}",
            CLUSTER_CLASSPATH,
        ]
        if runner == "flink-cluster":
            environment = ["--environment_type=LOOPBACK"]
        else:
            environment = ["--environment_type=EXTERNAL", f"--environment_config={worker_pool}"]
        return [*cluster, *environment, f"--parallelism={FLINK_PARALLELISM[runner]}"]
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
            f"--parallelism={FLINK_PARALLELISM[runner]}",
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
    return {
        "events": events,
        "states": states,
        "seconds": seconds,
        "peak_rss_mib": peak_rss_mib(),
    }


def _embedded_states(state_dir: Path) -> int:
    from frontierflow.state.storage.rocksdb import RocksDBStore

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


def _cache_root(env: Mapping[str, str], home: Path, override: str, name: str) -> Path:
    """The infra scripts' cache dir: `$override`, else
    `${XDG_CACHE_HOME:-~/.cache}/frontierflow/<name>`."""
    if env.get(override):
        return Path(env[override])
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else home / ".cache") / "frontierflow" / name


def cached_prism(beam_version: str, env: Mapping[str, str], home: Path) -> Path | None:
    """The Prism binary infra/prism/build.sh left in its cache for `beam_version`, if any:
    `<PRISM_CACHE or ~/.cache/frontierflow/prism>/<version>/prism`, executable."""
    binary = cached_prism_path(beam_version, env, home)
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def cached_flink_job_server(beam_version: str, env: Mapping[str, str], home: Path) -> Path | None:
    """The job-server jar infra/flink/fetch-job-server.sh left in its cache, looked for in
    the script's order: the published jar at `beam_version`, the assembled launcher at
    `beam_version`, then the assembled launcher at the fallback version (an assembled jar
    counts only with its `.complete` marker)."""
    cache = _cache_root(env, home, "FLINK_JOB_SERVER_CACHE", "flink")
    stem = f"beam-runners-flink-{FLINK_VERSION}-job-server"
    published = cache / f"{stem}-{beam_version}.jar"
    if published.is_file():
        return published
    fallback = env.get("FLINK_RUNNER_FALLBACK_VERSION", FLINK_RUNNER_FALLBACK_VERSION)
    for version in dict.fromkeys(v for v in (beam_version, fallback) if v):
        launcher = cache / f"{stem}-{version}-launcher.jar"
        if launcher.is_file() and launcher.with_name(launcher.name + ".complete").is_file():
            return launcher
    return None


@dataclass(frozen=True, slots=True)
class RunnerLookup:
    """Where a runner's binary or jar came from: a path, or why there is none."""

    path: str | None
    note: str


def find_runner(
    runner: str,
    beam_version: str,
    *,
    env: Mapping[str, str],
    home: Path,
    infra: Path = INFRA,
) -> RunnerLookup:
    """The Prism binary or Flink job-server jar when no option gave one: first what an
    earlier run of the infra script cached, then the script itself when this is a checkout
    (it builds or resolves once), else a note that names the option and the script."""
    if runner == "prism":
        cached, script, option = (
            cached_prism(beam_version, env, home),
            "prism/build.sh",
            "prism-location",
        )
    elif runner == "flink":
        cached = cached_flink_job_server(beam_version, env, home)
        script, option = "flink/fetch-job-server.sh", "flink-job-server-jar"
    else:
        raise ValueError(f"no binary or jar to find for runner {runner!r}")
    if cached is not None:
        return RunnerLookup(str(cached), f"cached: {cached}")
    if (infra / script).is_file():
        return _infra_path(infra, script)
    where = (
        cached_prism_path(beam_version, env, home)
        if runner == "prism"
        else _cache_root(env, home, "FLINK_JOB_SERVER_CACHE", "flink")
    )
    return RunnerLookup(
        None,
        f"skipped: nothing cached at {where} and no infra/{script} beside this install; "
        f"pass --{option}=PATH, or run `bash infra/{script}` once from a checkout of "
        "frontierflow (it caches there and later runs find it)",
    )


def cached_prism_path(beam_version: str, env: Mapping[str, str], home: Path) -> Path:
    """Where infra/prism/build.sh puts the binary for `beam_version`."""
    return _cache_root(env, home, "PRISM_CACHE", "prism") / beam_version / "prism"


def _infra_path(infra: Path, script: str) -> RunnerLookup:
    """Run an infra script that prints one path."""
    try:
        done = subprocess.run(
            ["bash", str(infra / script)],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return RunnerLookup(None, f"skipped: infra/{script} took over {SCRIPT_TIMEOUT_S} s")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) != 1 or not Path(lines[0]).is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return RunnerLookup(None, f"skipped: infra/{script} failed: {last}")
    return RunnerLookup(lines[0], f"from infra/{script}")


def beam_version() -> str:
    """The installed Beam's version: the one pyproject.toml pins, which the infra scripts
    build for."""
    import apache_beam

    return str(apache_beam.__version__)


def run_beam_bench(
    events: int = 2_000,
    runners: Sequence[str] = DEFAULT_RUNNERS,
    prism_location: str | None = None,
    flink_jar: str | None = None,
    flink_conf_dir: str | None = None,
    repeats: int = 3,
    *,
    outlinks: int = 30,
    work_dir: Path | None = None,
    flink_master: str | None = None,
    worker_pool: str | None = None,
    graph: str | None = None,
) -> str:
    """Generate the log (with `graph`, a breadth-first crawl of that web graph:
    `bench.graph_log`), run every runner `repeats` times in turn, format the report.

    Prism and Flink locations that are not given come from the repo's infra scripts when
    they are there; a runner whose binary or jar cannot be had is skipped with a note.
    """
    unknown = [r for r in runners if r not in RUNNERS]
    if unknown:
        raise ValueError(f"unknown runners {unknown}; known: {', '.join(RUNNERS)}")
    if events < 1 or repeats < 1:
        raise ValueError("events and repeats must be >= 1")
    notes: list[str] = []
    home, env = Path.home(), dict(os.environ)
    if "prism" in runners and prism_location is None:
        found = find_runner("prism", beam_version(), env=env, home=home)
        prism_location = found.path
        notes.append(f"prism: {found.note}")
    if any(r.startswith("flink") for r in runners) and flink_jar is None:
        found = find_runner("flink", beam_version(), env=env, home=home)
        flink_jar = found.path
        notes.append(f"flink: {found.note}")
    if "flink" in runners and flink_jar and flink_conf_dir is None:
        if (INFRA / "flink" / "config.yaml").is_file():
            flink_conf_dir = str(INFRA / "flink")
        else:
            notes.append(
                "flink: no infra/flink beside this install, so Flink's default state backend "
                "(not RocksDB); pass --flink-conf-dir=DIR with infra/flink/config.yaml"
            )
    if "flink-cluster" in runners or "flink-cluster-2" in runners:
        if not flink_master:
            notes.append("flink-cluster: no --flink-master (start: infra/flink/cluster.sh start)")
        elif "flink-cluster-2" in runners and not worker_pool:
            notes.append("flink-cluster-2: no --worker-pool (start: infra/flink/worker_pool.py)")
    ready = {
        "prism": bool(prism_location),
        "flink": bool(flink_jar),
        "flink-cluster": bool(flink_jar and flink_master),
        "flink-cluster-2": bool(flink_jar and flink_master and worker_pool),
    }
    active = [r for r in runners if ready.get(r, True)]
    setup = BenchSetup(events=events, outlinks=outlinks, repeats=repeats)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        log, small = root / "events.avro", root / "small.avro"
        if graph is None:
            generate_log(log, setup)
            generate_log(small, BenchSetup(events=FIXED_COST_EVENTS, outlinks=outlinks, repeats=1))
            what = f"{outlinks} outlinks each"
        else:
            events, mean_links = write_graph_log(log, graph, events)
            write_graph_log(small, graph, FIXED_COST_EVENTS)
            what = f"a breadth-first crawl of {graph}, {mean_links:.1f} outlinks a page"
        args = {
            r: []
            if r == "embedded"
            else beam_args(r, prism_location, flink_jar, flink_conf_dir, flink_master, worker_pool)
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
        f"log: {events:,} FetchEvents, {what}, {size_mb:.1f} MB Avro; "
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
        "flink-cluster": "cluster-p1",
        "flink-cluster-2": "cluster-p2",
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
