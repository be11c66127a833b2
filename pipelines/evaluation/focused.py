"""Akbari Torkestani 2012's evaluation: focused crawls of a topical web, scored by precision
and recall.

Every strategy crawls the web from the same seeds for `cycles` cycles of `budget` downloads
each, keeping its state between cycles (only LAFC learns from it). After B downloads:
- precision (eq. 20) = relevant pages downloaded / downloads;
- recall (eq. 21) = relevant pages downloaded / |N_S|, where N_S is, as in the paper, the
  relevant pages returned by any of the crawlers compared (pooled over strategies, runs and
  cycles); recall against every relevant page reachable from the seeds is reported beside
  it, as the stricter measure.
Relevance is the judge's (`Judge`: similarity ≥ 0.75 by default, the paper's). The t-test is
Table 4's: paired over the download checkpoints of the precision curves (Fig. 7 averages
topics; here per topic and over all topics), two-sided.
"""

from __future__ import annotations

import csv
import logging
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from frontierflow.pipelines.evaluation.plotting import headless_pyplot
from frontierflow.pipelines.evaluation.simulator import RecordedWeb, simulate_cycles
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.lafc import LafcSettings
from frontierflow.pipelines.strategies.lafc_plus import LafcPlusSettings
from frontierflow.pipelines.strategies.tres import TresSettings
from frontierflow.state.relevance import Judge, Topic
from frontierflow.state.tres import TresParams

log = logging.getLogger(__name__)

LEARNING = ("lafc", "random", "tres")
"""Strategies whose crawl depends on the random seed: run `runs` times and averaged."""


@dataclass(frozen=True, slots=True)
class FocusedSetup:
    """What one focused-crawl evaluation compares, and how."""

    strategies: tuple[str, ...] = ("lafc", "best-first", "bfs")
    budget: int = 2000
    cycles: int = 3
    points: int = 10
    """Download checkpoints per cycle (budget/points, 2·budget/points, ..., budget)."""
    runs: int = 5
    """Repetitions, with seeds 0..runs−1, of the strategies in LEARNING."""
    judge: Judge = field(default_factory=Judge)
    lafc: LafcSettings = field(default_factory=LafcSettings)
    lafc_plus: LafcPlusSettings = field(default_factory=LafcPlusSettings)
    tres: TresParams = field(default_factory=TresParams)
    """The TRES-style learner's constants; its reward is `judge`'s verdict, its seed the run's."""
    seeds: tuple[str, ...] = ()
    """Seed URLs; default: `default_seeds(web)`."""

    def __post_init__(self) -> None:
        if self.budget < 1 or self.cycles < 1 or self.runs < 1:
            raise ValueError("budget, cycles and runs must be >= 1")
        if not 1 <= self.points <= self.budget:
            raise ValueError(f"points must be in 1..budget, got {self.points}")
        if not self.strategies:
            raise ValueError("no strategies to compare")

    def checkpoints(self) -> list[int]:
        return sorted(
            {max(1, round(self.budget * (i + 1) / self.points)) for i in range(self.points)}
        )


@dataclass(frozen=True, slots=True)
class Curve:
    """One strategy's precision and recall at each checkpoint of one cycle (mean of runs)."""

    topic: str
    strategy: str
    cycle: int
    downloads: tuple[int, ...]
    precision: tuple[float, ...]
    recall: tuple[float, ...]
    recall_all: tuple[float, ...]
    precision_runs: tuple[tuple[float, ...], ...]
    """Precision at each checkpoint, per run (one run for deterministic strategies)."""
    downloaded: float
    """Mean pages downloaded in the cycle (below the budget when the crawl ran dry)."""


@dataclass(frozen=True, slots=True)
class TopicResult:
    topic: str
    relevant_reachable: int
    relevant_pooled: int
    relevant_in_web: int
    curves: list[Curve]
    seconds: dict[str, float]
    """Wall-clock seconds per run (all cycles), per strategy."""
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    """Processor seconds of this process per run (all cycles): the compute spent, which
    other work on shared cores does not inflate as it does the wall clock."""


def default_seeds(web: RecordedWeb) -> tuple[str, ...]:
    """Each host's top page: its shortest URL ending in /index.html (else its shortest)."""
    best: dict[str, str] = {}
    for url in web.urls:
        host = url.split("/", 3)[2]
        current = best.get(host)
        key = (not url.endswith("/index.html"), url.count("/"), len(url), url)
        if current is None or key < (
            not current.endswith("/index.html"),
            current.count("/"),
            len(current),
            current,
        ):
            best[host] = url
    return tuple(best[h] for h in sorted(best))


def reachable(web: RecordedWeb, seeds: Sequence[int]) -> np.ndarray:
    """Pages reachable from `seeds` along links (a boolean mask)."""
    seen = np.zeros(len(web.urls), dtype=bool)
    queue = deque(seeds)
    seen[list(seeds)] = True
    while queue:
        page = queue.popleft()
        for child in web.outlinks(page).tolist():
            if not seen[child]:
                seen[child] = True
                queue.append(child)
    return seen


def relevant_mask(web: RecordedWeb, topic: Topic, judge: Judge) -> np.ndarray:
    return np.fromiter((judge.relevant(topic, t) for t in web.terms), bool, len(web.urls))


def paired_t_test(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Mean of x − y and the two-sided p-value of the paired t-test (Akbari Torkestani 2012,
    Table 4)."""
    from scipy import stats

    diff = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    if len(diff) < 2 or np.allclose(diff, diff[0]):
        return float(diff.mean()) if len(diff) else 0.0, 0.0 if np.any(diff) else 1.0
    result = stats.ttest_rel(x, y)
    return float(diff.mean()), float(result.pvalue)


def evaluate_topic(web: RecordedWeb, topic: Topic, setup: FocusedSetup) -> TopicResult:
    """Crawl `web` for `topic` with every strategy; precision and recall per cycle."""
    seed_urls = setup.seeds or default_seeds(web)
    seeds = [web.index_of(u) for u in seed_urls]
    relevant = relevant_mask(web, topic, setup.judge)
    reach = reachable(web, seeds)
    n_reachable = int(np.count_nonzero(relevant & reach))
    checkpoints = setup.checkpoints()
    orders: dict[tuple[str, int], list[np.ndarray]] = {}
    seconds: dict[str, float] = {}
    cpu_seconds: dict[str, float] = {}
    for name in setup.strategies:
        runs = setup.runs if name in LEARNING else 1
        started, cpu_started = time.perf_counter(), time.process_time()
        for run in range(runs):
            lafc = LafcSettings(
                control_threshold=setup.lafc.control_threshold,
                learning=setup.lafc.learning,
                seed=run,
            )
            strategy = build_strategy(
                name,
                budget=setup.budget,
                crawl_id="sim",
                seed=run,
                topic=topic,
                lafc=lafc,
                lafc_plus=setup.lafc_plus,
                tres=TresSettings(replace(setup.tres, seed=run), setup.judge),
            )
            for crawl in simulate_cycles(web, strategy, seeds, setup.budget, setup.cycles):
                orders.setdefault((name, crawl.cycle), []).append(crawl.downloaded)
        seconds[name] = (time.perf_counter() - started) / runs
        cpu_seconds[name] = (time.process_time() - cpu_started) / runs
        log.info("%s/%s: %.1f s per run", topic.name, name, seconds[name])
    pooled = np.zeros(len(web.urls), dtype=bool)
    for runs_orders in orders.values():
        for order in runs_orders:
            pooled[order[relevant[order]]] = True
    n_pooled = int(np.count_nonzero(pooled))
    curves = []
    for (name, cycle), runs_orders in orders.items():
        precision_runs, recall_runs, recall_all_runs = [], [], []
        for order in runs_orders:
            hits = np.cumsum(relevant[order])
            p, r, ra = [], [], []
            for b in checkpoints:
                k = min(b, len(order))
                found = int(hits[k - 1]) if k else 0
                p.append(found / k if k else 0.0)
                r.append(found / n_pooled if n_pooled else 0.0)
                ra.append(found / n_reachable if n_reachable else 0.0)
            precision_runs.append(tuple(p))
            recall_runs.append(r)
            recall_all_runs.append(ra)
        curves.append(
            Curve(
                topic=topic.name,
                strategy=name,
                cycle=cycle,
                downloads=tuple(checkpoints),
                precision=tuple(np.mean(precision_runs, axis=0).tolist()),
                recall=tuple(np.mean(recall_runs, axis=0).tolist()),
                recall_all=tuple(np.mean(recall_all_runs, axis=0).tolist()),
                precision_runs=tuple(precision_runs),
                downloaded=float(np.mean([len(o) for o in runs_orders])),
            )
        )
    return TopicResult(
        topic.name,
        n_reachable,
        n_pooled,
        int(np.count_nonzero(relevant)),
        curves,
        seconds,
        cpu_seconds,
    )


def write_curves_csv(path: Path, results: Sequence[TopicResult]) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(
            ["topic", "strategy", "cycle", "downloads", "precision", "recall", "recall_all"]
        )
        for result in results:
            for c in result.curves:
                for i, b in enumerate(c.downloads):
                    out.writerow(
                        [
                            c.topic,
                            c.strategy,
                            c.cycle,
                            b,
                            f"{c.precision[i]:.6f}",
                            f"{c.recall[i]:.6f}",
                            f"{c.recall_all[i]:.6f}",
                        ]
                    )


def _curve(result: TopicResult, strategy: str, cycle: int) -> Curve | None:
    for c in result.curves:
        if c.strategy == strategy and c.cycle == cycle:
            return c
    return None


def summary_lines(results: Sequence[TopicResult], setup: FocusedSetup) -> list[str]:
    """Markdown: per topic and cycle, precision and recall at the budget; the t-tests."""
    lines = [
        "| topic | relevant (reachable / pooled) | strategy | "
        + " | ".join(f"cycle {c + 1} P@{setup.budget}" for c in range(setup.cycles))
        + f" | R@{setup.budget} (pooled) last cycle | R (all reachable) last cycle"
        + " | downloads per cycle |",
        "|---|---:|---|" + "---:|" * (setup.cycles + 3),
    ]
    last = setup.cycles - 1
    for r in results:
        for name in setup.strategies:
            cells, downloads = [], []
            for cycle in range(setup.cycles):
                c = _curve(r, name, cycle)
                cells.append(f"{c.precision[-1]:.3f}" if c else "–")
                downloads.append(f"{c.downloaded:.0f}" if c else "–")
            c = _curve(r, name, last)
            assert c is not None
            lines.append(
                f"| {r.topic} | {r.relevant_reachable} / {r.relevant_pooled} | {name} | "
                + " | ".join(cells)
                + f" | {c.recall[-1]:.3f} | {c.recall_all[-1]:.3f} | {' / '.join(downloads)} |"
            )
    for learner in LEARNERS:
        if learner in setup.strategies:
            lines += ["", t_test_table(results, setup, learner)]
    lines += ["", compute_table(results, setup)]
    return lines


LEARNERS = ("lafc", "lafc-plus", "tres")
"""Strategies the t-tests compare with every other strategy in the run."""
LABELS = {"lafc": "LAFC", "lafc-plus": "LAFC+", "tres": "TRES-style"}
"""How tables name the learners."""


def compute_table(results: Sequence[TopicResult], setup: FocusedSetup) -> str:
    """Processor seconds per crawl (all cycles, mean over runs) per topic and strategy, the
    compute beyond breadth-first's on the same crawl (breadth-first is the engine's floor),
    and the wall-clock seconds beside them."""
    rows = [
        "| topic | strategy | CPU seconds per crawl | beyond bfs | wall seconds |",
        "|---|---|---:|---:|---:|",
    ]
    for r in results:
        floor = r.cpu_seconds.get("bfs")
        for name in setup.strategies:
            spent = r.cpu_seconds.get(name)
            if spent is None:
                continue
            beyond = "–" if floor is None else f"{spent - floor:+.1f}"
            rows.append(
                f"| {r.topic} | {name} | {spent:.1f} | {beyond} | {r.seconds.get(name, 0.0):.1f} |"
            )
    return "\n".join(rows)


def t_test_table(results: Sequence[TopicResult], setup: FocusedSetup, learner: str = "lafc") -> str:
    """`learner` against each other strategy: mean precision difference over the download
    checkpoints of each cycle from the second on, and its paired t-test p-value (Akbari
    Torkestani 2012, Table 4)."""
    label = LABELS.get(learner, learner)
    rows = [
        f"| topic | cycle | {label} vs | mean precision ({label} − other) | p-value | result |",
        "|---|---:|---|---:|---:|---|",
    ]
    topics = [*((r.topic, [r]) for r in results)]
    if len(results) > 1:
        topics.append(("all topics (mean)", list(results)))
    for label, group in topics:
        for cycle in range(min(1, setup.cycles - 1), setup.cycles):
            for other in setup.strategies:
                if other == learner:
                    continue
                xs: list[float] = []
                ys: list[float] = []
                for r in group:
                    a, b = _curve(r, learner, cycle), _curve(r, other, cycle)
                    if a is None or b is None:
                        continue
                    xs += a.precision
                    ys += b.precision
                if not xs:
                    continue
                if len(group) > 1:  # Fig. 7: average the topics at each checkpoint first
                    n = len(setup.checkpoints())
                    xs = np.mean(np.reshape(xs, (-1, n)), axis=0).tolist()
                    ys = np.mean(np.reshape(ys, (-1, n)), axis=0).tolist()
                mean, p = paired_t_test(xs, ys)
                verdict = "+" if mean > 0 else "−"
                verdict += " (significant)" if p < 0.05 else " (not significant)"
                rows.append(
                    f"| {label} | {cycle + 1} | {other} | {mean:+.4f} | {_fmt_p(p)} | {verdict} |"
                )
    return "\n".join(rows)


def _fmt_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return f"{p:.2e}" if p < 0.001 else f"{p:.3f}"


def plot_precision(path: Path, result: TopicResult, setup: FocusedSetup) -> None:
    """Precision against downloads, one panel per cycle (Akbari Torkestani 2012, Figs. 2–6)."""
    plt = headless_pyplot()

    fig, axes = plt.subplots(
        1, setup.cycles, figsize=(4.2 * setup.cycles, 3.8), dpi=110, sharey=True, squeeze=False
    )
    for cycle, ax in enumerate(axes[0]):
        for name in setup.strategies:
            c = _curve(result, name, cycle)
            if c is not None:
                ax.plot(c.downloads, c.precision, marker="o", markersize=3, label=name)
        ax.set_title(f"{result.topic}: cycle {cycle + 1}")
        ax.set_xlabel("downloaded pages")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("precision")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run_focused(
    web: RecordedWeb, topics: Sequence[Topic], setup: FocusedSetup, out_dir: Path, web_name: str
) -> list[TopicResult]:
    """Evaluate every topic; write focused.csv, summary.md and one precision_<topic>.png each."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for topic in topics:
        result = evaluate_topic(web, topic, setup)
        results.append(result)
        plot_precision(out_dir / f"precision_{topic.name}.png", result, setup)
    write_curves_csv(out_dir / "focused.csv", results)
    judge = setup.judge
    context = [
        f"# Focused crawls of {web_name}",
        "",
        f"- pages: {len(web.urls):,}; seeds: {', '.join(setup.seeds or default_seeds(web))}",
        f"- budget {setup.budget:,} downloads per cycle, {setup.cycles} cycles, "
        f"{setup.runs} runs of the randomised strategies (mean shown)",
        f"- judge: similarity ≥ {judge.threshold}"
        + (f" and ≥ {judge.min_occurrences} keyword occurrences" if judge.min_occurrences else ""),
        f"- LAFC: C = {setup.lafc.control_threshold}, a = {setup.lafc.learning.a}, "
        f"scheme {setup.lafc.learning.scheme.value}",
        f"- LAFC+: {setup.lafc_plus.params}",
        f"- TRES-style learner: {setup.tres}",
        "- topics: " + "; ".join(f"{t.name} = {' '.join(sorted(t.weights))}" for t in topics),
        "- relevant pages in the web per topic: "
        + ", ".join(f"{r.topic} {r.relevant_in_web}" for r in results),
        "- seconds per run: "
        + "; ".join(
            f"{r.topic}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.seconds.items())
            for r in results
        ),
        "",
    ]
    (out_dir / "summary.md").write_text("\n".join(context + summary_lines(results, setup)) + "\n")
    return results
