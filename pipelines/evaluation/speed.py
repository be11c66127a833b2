"""Thread-scaling controllers on real bandwidth traces: the evaluation of Nandy, Sarkar &
Das 2012.

Runs every controller on every trace with the simulated fetcher of
`connectors.speedsim` (the controller sees only the FetchEvents, through `speed.observe`)
and writes per-run metrics (CSV), a summary over traces (median and quartiles, Markdown
and CSV) and, per trace, a plot like the paper's Figs. 6–7: deviation, crawl speed against
the available capacity, and threads over time.

Metrics of one run:
- pages/s: successful pages over the simulated time;
- capacity share: bytes of successful pages ÷ ∫ trace capacity dt;
- politeness violations: requests started on a host already at its concurrency limit;
- thread changes per hour: decisions with threads_after ≠ threads_before, per hour;
- recovery after a drop (on a 1 s grid with 10 s trailing means C10 of capacity and G10
  of delivered bytes): a *drop* starts at t0 when C10(t0) < 0.5·C10(t0 − 10 s); it counts
  once C10 is back to ≥ 0.8·C10(t0 − 10 s) (at t1; drops whose capacity never comes back
  are not counted); the *recovery time* is the first t ≥ t1 with G10(t) ≥ 0.8·min(G10(t0 −
  10 s), C10(t)) minus t1: how long after the link returned the crawl needed to regain its
  pre-drop speed (or what the link now allows). Never regained: counted as unrecovered.
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

import numpy as np

from frontierflow.pipelines.evaluation.plotting import headless_pyplot
from frontierflow.pipelines.evaluation.speedsim import (
    SimResult,
    SimSettings,
    read_trace,
    simulate_fetcher,
)
from frontierflow.pipelines.speed.controllers import initial_controller
from frontierflow.pipelines.speed.per_fetcher import observe
from frontierflow.pipelines.speed.settings import ControllerSettings, settings_for
from frontierflow.schemas.records import FetchEvent, ScalingDecision
from frontierflow.state.speed import SpeedState

log = logging.getLogger(__name__)

DEFAULT_CONTROLLERS = (
    "hypothesis",
    "hypothesis-literal",
    "aimd",
    "autothrottle",
    "fixed-4",
    "fixed-16",
)
SMOOTH_S = 10
DROP_RATIO = 0.5
BACK_RATIO = 0.8


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """One controller on one trace."""

    trace: str
    controller: str
    duration_s: float
    mean_mbps: float
    pages_per_s: float
    capacity_share: float
    failures: int
    violations: int
    thread_changes_per_h: float
    mean_threads: float
    drops: int
    unrecovered: int
    recovery_s: float  # median over recovered drops; NaN without any


@dataclass
class _Run:
    """Everything a plot needs from one run (kept in the parent process)."""

    metrics: RunMetrics
    decisions: list[ScalingDecision]
    capacity_pages: np.ndarray


def make_controller(
    settings: ControllerSettings,
) -> tuple[list[SpeedState | None], Callable[[FetchEvent], list[ScalingDecision]]]:
    """A closure feeding each event to `observe`, as the fetcher's control loop would."""
    box: list[SpeedState | None] = [None]

    def control(event: FetchEvent) -> list[ScalingDecision]:
        box[0], decisions = observe(box[0], event, settings)
        return decisions

    return box, control


def run_one(
    trace_path: Path, controller: str, sim: SimSettings, overrides: dict[str, object]
) -> _Run:
    """One simulated crawl of `trace_path` under `controller`."""
    settings = settings_for(controller, **overrides)
    trace = read_trace(trace_path)
    _, control = make_controller(settings)
    result = simulate_fetcher(
        trace,
        control,
        initial_controller(settings).threads,
        sim,
    )
    metrics = run_metrics(result, controller, float(np.mean(trace.mbps)))
    return _Run(metrics, result.decisions, result.capacity_per_s / sim.mean_page_bytes)


def _trailing_mean(x: np.ndarray, width: int) -> np.ndarray:
    """Mean over the `width` seconds before each second (shorter at the start)."""
    c = np.concatenate(([0.0], np.cumsum(x)))
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(idx - width, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def recovery_times(capacity: np.ndarray, delivered: np.ndarray) -> tuple[list[float], int]:
    """Recovery times (s) after each counted drop, and how many never recovered (module
    docstring gives the definition)."""
    c10 = _trailing_mean(capacity, SMOOTH_S)
    g10 = _trailing_mean(delivered, SMOOTH_S)
    times: list[float] = []
    unrecovered = 0
    t = 2 * SMOOTH_S
    n = len(capacity)
    while t < n:
        before = c10[t - SMOOTH_S]
        if not (before > 0 and c10[t] < DROP_RATIO * before):
            t += 1
            continue
        back = next((u for u in range(t, n) if c10[u] >= BACK_RATIO * before), None)
        if back is None:
            break  # the link never came back in this run: not a drop we can time
        speed_before = g10[t - SMOOTH_S]
        done = next(
            (u for u in range(back, n) if g10[u] >= BACK_RATIO * min(speed_before, c10[u])), None
        )
        if done is None:
            unrecovered += 1
            break
        times.append(float(done - back))
        t = max(done, back) + 1
    return times, unrecovered


def run_metrics(result: SimResult, controller: str, mean_mbps: float) -> RunMetrics:
    decisions = result.decisions
    changes = sum(d.threads_after != d.threads_before for d in decisions)
    hours = result.duration_s / 3600.0
    recov, unrecovered = recovery_times(result.capacity_per_s, result.delivered_per_s)
    mean_threads = float(np.mean([d.threads_before for d in decisions])) if decisions else 0.0
    return RunMetrics(
        trace=result.trace,
        controller=controller,
        duration_s=result.duration_s,
        mean_mbps=mean_mbps,
        pages_per_s=result.pages / result.duration_s,
        capacity_share=result.useful_bytes / result.capacity_bytes
        if result.capacity_bytes
        else 0.0,
        failures=result.failures,
        violations=result.violations,
        thread_changes_per_h=changes / hours,
        mean_threads=mean_threads,
        drops=len(recov) + unrecovered,
        unrecovered=unrecovered,
        recovery_s=float(np.median(recov)) if recov else math.nan,
    )


@dataclass(frozen=True, slots=True)
class SpeedEvalSetup:
    traces: tuple[Path, ...]
    controllers: tuple[str, ...] = DEFAULT_CONTROLLERS
    duration_s: float | None = None
    seed: int = 0
    workers: int = 2
    plots: int = -1  # traces to plot: -1 all, 0 none, N the first N
    overrides: tuple[tuple[str, object], ...] = ()


def run_speed_eval(setup: SpeedEvalSetup, out: Path) -> list[RunMetrics]:
    """Every controller on every trace; writes runs.csv, summary.csv, summary.md, plots/."""
    for name in setup.controllers:
        settings_for(name, **dict(setup.overrides))  # refuse bad settings before any work
    sim = SimSettings(seed=setup.seed, duration_s=setup.duration_s)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(t, c) for t in setup.traces for c in setup.controllers]
    overrides = dict(setup.overrides)
    if setup.workers > 1:
        with ProcessPoolExecutor(setup.workers) as pool:
            futures = [pool.submit(run_one, t, c, sim, overrides) for t, c in jobs]
            runs = [f.result() for f in futures]
    else:
        runs = [run_one(t, c, sim, overrides) for t, c in jobs]
    metrics = [r.metrics for r in runs]
    write_runs_csv(out / "runs.csv", metrics)
    summary = summarise(metrics, setup.controllers)
    write_summary(out, summary, setup, len(setup.traces))
    plot_dir = out / "plots"
    traces = [t.name for t in setup.traces]
    wanted = traces if setup.plots < 0 else traces[: setup.plots]
    for name in wanted:
        plot_trace(plot_dir / f"{name}.png", [r for r in runs if r.metrics.trace == name])
    if metrics:
        plot_summary(out / "capacity_share.png", metrics, setup.controllers)
    return metrics


def write_runs_csv(path: Path, metrics: Sequence[RunMetrics]) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        names = list(RunMetrics.__slots__)
        out.writerow(names)
        for m in metrics:
            row = asdict(m)
            out.writerow([_fmt(row[n]) for n in names])


def _fmt(value: object) -> object:
    return f"{value:.6g}" if isinstance(value, float) else value


SUMMARY_FIELDS = ("capacity_share", "pages_per_s", "thread_changes_per_h", "recovery_s")


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    v = np.array([x for x in values if not math.isnan(x)])
    if not len(v):
        return math.nan, math.nan, math.nan
    q1, q2, q3 = np.percentile(v, [25, 50, 75])
    return float(q1), float(q2), float(q3)


def summarise(
    metrics: Sequence[RunMetrics], controllers: Sequence[str]
) -> dict[str, dict[str, object]]:
    """Per controller: quartiles of each summary field over traces, and totals."""
    out: dict[str, dict[str, object]] = {}
    for name in controllers:
        rows = [m for m in metrics if m.controller == name]
        entry: dict[str, object] = {
            f: _quartiles([getattr(m, f) for m in rows]) for f in SUMMARY_FIELDS
        }
        entry["violations"] = sum(m.violations for m in rows)
        entry["failures"] = sum(m.failures for m in rows)
        entry["drops"] = sum(m.drops for m in rows)
        entry["unrecovered"] = sum(m.unrecovered for m in rows)
        entry["traces"] = len(rows)
        out[name] = entry
    return out


def write_summary(
    out: Path, summary: dict[str, dict[str, object]], setup: SpeedEvalSetup, traces: int
) -> None:
    def q(v: object, pct: bool = False, digits: int = 2) -> str:
        a, b, c = cast(tuple[float, float, float], v)
        if math.isnan(b):
            return "–"
        if pct:
            return f"{b:.1%} ({a:.1%}–{c:.1%})"
        return f"{b:.{digits}f} ({a:.{digits}f}–{c:.{digits}f})"

    lines = [
        f"# Thread scaling on {traces} bandwidth traces (median, quartiles in brackets)",
        "",
        f"- duration: {_duration_text(setup.duration_s)}",
        f"- simulation seed: {setup.seed}; overrides: {dict(setup.overrides) or 'none'}",
        "",
        "| controller | capacity used | pages/s | thread changes/h | recovery s | "
        "violations | failed fetches | unrecovered drops |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for name, e in summary.items():
        lines.append(
            f"| {name} | {q(e['capacity_share'], pct=True)} | {q(e['pages_per_s'])} | "
            f"{q(e['thread_changes_per_h'], digits=0)} | {q(e['recovery_s'], digits=0)} | "
            f"{e['violations']} | {e['failures']} | {e['unrecovered']}/{e['drops']} |"
        )
        rows.append([name, *(f"{x:.6g}" for f in SUMMARY_FIELDS for x in e[f]), e["violations"]])  # type: ignore[attr-defined]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    with (out / "summary.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "controller",
                *(f"{f}_{p}" for f in SUMMARY_FIELDS for p in ("q1", "median", "q3")),
                "violations",
            ]
        )
        w.writerows(rows)


def _duration_text(duration_s: float | None) -> str:
    return "one pass of each trace" if duration_s is None else f"{duration_s:g} s"


def plot_trace(path: Path, runs: Sequence[_Run]) -> None:
    """Like Nandy, Sarkar & Das 2012, Figs. 6–7: deviation ξ, crawl speed with the available
    capacity (the paper's light-gray "probable crawling speed"), and threads, against
    time."""
    if not runs:
        return
    plt = headless_pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), dpi=100, sharex=True)
    cap = runs[0].capacity_pages
    axes[1].plot(np.arange(len(cap)), cap, color="0.75", lw=2, label="capacity (pages/s)")
    for run in runs:
        d = run.decisions
        t = [x.window_end / 1000.0 for x in d]
        name = run.metrics.controller
        axes[0].plot(t, [x.speed_stddev for x in d], lw=1, label=name)
        axes[1].plot(t, [x.crawl_speed for x in d], lw=1, label=name)
        axes[2].step(t, [x.threads_after for x in d], where="post", lw=1, label=name)
    axes[0].set_ylabel("deviation ξ (pages/s)")
    axes[1].set_ylabel("crawl speed (pages/s)")
    axes[2].set_ylabel("threads")
    axes[2].set_xlabel("time (s)")
    axes[1].legend(fontsize=7, ncol=4)
    fig.suptitle(runs[0].metrics.trace)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_summary(path: Path, metrics: Sequence[RunMetrics], controllers: Sequence[str]) -> None:
    """Box plot of the capacity share per controller over traces."""
    plt = headless_pyplot()
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    data = [[m.capacity_share for m in metrics if m.controller == c] for c in controllers]
    ax.boxplot(data)
    ax.set_xticks(range(1, len(controllers) + 1), list(controllers), rotation=15)
    ax.axhline(0.9, color="0.6", ls="--", lw=1)
    ax.set_ylabel("share of trace capacity used")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
