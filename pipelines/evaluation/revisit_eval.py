"""The revisit policies' evaluation on the news site: windows, runs, tuning.

Each run is one 8-day window of the site, entered after a warm-up (the crawl starts
`warmup_days` earlier and keeps what it learned; only the window is counted), one policy, one
download rate. Constants are chosen on windows that end before `TUNING_END` (`tune`) and
reported on later windows (`REPORT_STARTS`) that tuning never saw. `frontierflow simulate
revisits` runs both; the reports are `revisit_report`'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import product
from pathlib import Path

import numpy as np

from frontierflow.connectors.news import iso_ms
from frontierflow.pipelines.evaluation.forager_fleet import WORLD_NEWS, ForagerSetup, build_site
from frontierflow.pipelines.evaluation.forager_report import freshness_and_age
from frontierflow.pipelines.evaluation.news_site import DAY_MS, HOME, NewsSite
from frontierflow.pipelines.evaluation.revisit_constants import (
    describe,
    tuned_constants,
    with_constants,
)
from frontierflow.pipelines.evaluation.revisit_fleet import run_fleet_revisits
from frontierflow.pipelines.evaluation.revisit_policy import (
    REVISIT_POLICIES,
    Policy,
    RevisitPolicySettings,
)
from frontierflow.pipelines.evaluation.revisits import RevisitMetrics, run_revisits

log = logging.getLogger(__name__)

TUNING_END = "2023-06-01T00:00:00Z"
"""Every constant is chosen on data before this time."""
TUNING_STARTS = (
    "2022-03-01T00:00:00Z",
    "2022-07-01T00:00:00Z",
    "2022-11-01T00:00:00Z",
    "2023-03-01T00:00:00Z",
)
REPORT_STARTS = (
    "2023-06-03T00:00:00Z",
    "2023-07-15T00:00:00Z",
    "2023-08-26T00:00:00Z",
    "2023-10-07T00:00:00Z",
)
"""After `TUNING_END`, warm-ups included (two days before each start)."""
WINDOWS = {"tuning": TUNING_STARTS, "report": REPORT_STARTS}
Progress = Callable[[int], None]
"""Called with the number of runs just finished."""


@dataclass(frozen=True, slots=True)
class RevisitResult:
    """One run's figures (the forager evaluation's definitions where they exist):

    - downloads, of which revisits (probes among them) and fetches of new links;
    - sent: fresh stories downloaded (each is sent to the agent once); relevant: those it
      rewarded (on topic, new, ≤ 24 h old; the forager evaluation's count, which includes
      stories of the warm-up rewarded in the window); sent efficiency = relevant / sent;
      relevant per 1,000 downloads;
    - published: on-topic stories that first appeared in the window; found: those of them
      rewarded before its end (what a policy finds of what it could find);
    - delay: minutes from a story's first appearance to its reward (mean and median, stories
      first seen in the window); freshness: the forager evaluation's (share of the last
      24 h's on-topic stories already rewarded, every 15 minutes);
    - copy freshness: share of the hub pages whose last downloaded version is current, every
      15 minutes (Cho & Garcia-Molina 2003 (TODS)'s freshness, what `optimal-freshness`
      maximises).
    """

    start: str
    download_ms: int
    policy: str
    seed: str
    """Where the policy started ("" for the fixed schedule, which starts from its list)."""
    constants: str
    downloads: int
    revisits: int
    probes: int
    fetches: int
    sent: int
    relevant: int
    published: int
    found: int
    sent_efficiency: float
    relevant_per_1000: float
    delay_min: float
    median_delay_min: float
    freshness: float
    copy_freshness: float

    @property
    def found_share(self) -> float:
        """found / published (1 when nothing was published)."""
        return self.found / self.published if self.published else 1.0


def summarise(
    site: NewsSite,
    topic: Sequence[str],
    start_ms: int,
    run: tuple[str, int, Policy, str, str],
    m: RevisitMetrics,
) -> RevisitResult:
    """`m` of the run (`start`, `download_ms`, policy, seed, constants) as a
    `RevisitResult`."""
    fm = m.fleet
    freshness, _ = freshness_and_age(site, topic, fm, start_ms)
    wanted = frozenset(topic)
    published = [
        u
        for u, st in site.stories.items()
        if st.section in wanted and start_ms <= st.published_ms < site.end_ms
    ]
    delays = [
        (fm.rewarded_at[u] - site.stories[u].published_ms) / 60_000
        for u in published
        if u in fm.rewarded_at
    ]
    start, download_ms, policy, seed, constants = run
    return RevisitResult(
        start=start,
        download_ms=download_ms,
        policy=policy.value,
        seed=seed,
        constants=constants,
        downloads=fm.downloaded,
        revisits=m.revisits,
        probes=m.probes,
        fetches=m.fetches,
        sent=fm.sent,
        relevant=fm.relevant,
        published=len(published),
        found=len(delays),
        sent_efficiency=fm.relevant / fm.sent if fm.sent else math.nan,
        relevant_per_1000=1000 * fm.relevant / max(1, fm.downloaded),
        delay_min=float(np.mean(delays)) if delays else math.nan,
        median_delay_min=float(np.median(delays)) if delays else math.nan,
        freshness=freshness,
        copy_freshness=float(np.mean(m.copy_fresh)) if m.copy_fresh else 0.0,
    )


# --- one evaluation -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RevisitEvaluation:
    """What `frontierflow simulate revisits` runs, its options parsed once."""

    news: Path
    out: Path
    starts: tuple[str, ...] = REPORT_STARTS
    days: float = 8.0
    warmup_days: float = 2.0
    download_ms: tuple[int, ...] = (10_000,)
    policies: tuple[Policy, ...] = REVISIT_POLICIES
    topic: tuple[str, ...] = WORLD_NEWS
    constants: Mapping[Policy, Mapping[str, str]] = field(default_factory=dict)
    """NAME=VALUE constants of a learned policy over those tuned at each download rate
    (`revisit_constants.tuned_constants`)."""
    seeds: tuple[str, ...] = (HOME,)
    """Where the learned policies (and `seed-only`) start, one run each; the fixed schedule
    starts from its list."""
    grid: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Tuning: every combination of these NAME → values, for each learned policy."""
    workers: int = 2

    def __post_init__(self) -> None:
        if not self.starts:
            raise ValueError("an evaluation needs at least one window start")
        for start in self.starts:
            iso_ms(start)  # NewsFormatError (a ValueError) for a bad time, before any work
        if self.days <= 0 or self.warmup_days < 0:
            raise ValueError("days must be > 0 and warm-up days >= 0")
        if not self.download_ms or min(self.download_ms) < 1:
            raise ValueError("download rates must be >= 1 ms")
        if not self.policies:
            raise ValueError("an evaluation needs at least one policy")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if not self.seeds:
            raise ValueError("an evaluation needs at least one seed")
        if self.grid:
            end = iso_ms(TUNING_END)
            late = [s for s in self.starts if iso_ms(s) + self.days * DAY_MS > end]
            if late:
                raise ValueError(f"tuning windows must end before {TUNING_END}: {late}")
        # a bad constant fails here, before any work
        for items in (*self.constants.values(), *self.combinations(Policy.DISCOVERY)):
            with_constants(RevisitPolicySettings(), items)

    def combinations(self, policy: Policy) -> list[dict[str, str]]:
        """The constants each run of `policy` uses: the grid's points, or none (its own)."""
        if not self.grid or not policy.learns:
            return [{}]
        names = [name for name, _ in self.grid]
        return [
            dict(zip(names, values, strict=True)) for values in product(*(v for _, v in self.grid))
        ]

    def settings_for(
        self, policy: Policy, combo: Mapping[str, str], download_ms: int
    ) -> RevisitPolicySettings:
        """The constants tuned at `download_ms`, then this evaluation's, then `combo`."""
        base = tuned_constants(download_ms).get(policy, RevisitPolicySettings())
        return with_constants(with_constants(base, self.constants.get(policy, {})), combo)

    def seeds_for(self, policy: Policy) -> tuple[str, ...]:
        """The fixed schedules run once (they start from their list), the others per seed; a
        fleet starts from its own list, as many runs as there are seeds, each with its
        random seed (0, 1, …)."""
        if policy.has_list:
            return ("",)
        if policy.is_fleet:
            return tuple(str(k) for k in range(len(self.seeds)))
        return self.seeds

    def runs(self) -> int:
        """Runs the evaluation makes (for a progress bar)."""
        per_window = sum(len(self.combinations(p)) * len(self.seeds_for(p)) for p in self.policies)
        return len(self.starts) * len(self.download_ms) * per_window


def _window(evaluation: RevisitEvaluation, start: str) -> list[RevisitResult]:
    """Every run of one window (one process builds the site once)."""
    e = evaluation
    start_ms = iso_ms(start)
    warm_ms = int(e.warmup_days * DAY_MS)
    begin = datetime.fromtimestamp((start_ms - warm_ms) / 1000, UTC)
    setup = ForagerSetup(
        news=e.news,
        start=begin.strftime("%Y-%m-%dT%H:%M:%SZ"),
        days=e.days + e.warmup_days,
        topic=e.topic,
    )
    site = build_site(setup)
    results = []
    for download_ms, policy in product(e.download_ms, e.policies):
        for seed, combo in product(e.seeds_for(policy), e.combinations(policy)):
            settings = e.settings_for(policy, combo, download_ms)
            if policy.is_fleet:
                m = run_fleet_revisits(
                    site, e.topic, policy, download_ms, settings, start_ms, int(seed)
                )
            else:
                m = run_revisits(
                    site, e.topic, policy, download_ms, settings, start_ms, seed or HOME
                )
            label = describe(settings) if policy.learns else ""
            run = (start, download_ms, policy, seed, label)
            results.append(summarise(site, e.topic, start_ms, run, m))
            r = results[-1]
            log.info(
                "%s %d ms %s from %s: %d relevant, delay %.1f min",
                start, download_ms, policy.value, seed or "its list", r.relevant, r.delay_min,
            )  # fmt: skip
    return results


def evaluate(
    evaluation: RevisitEvaluation, progress: Progress | None = None
) -> list[RevisitResult]:
    """Every window's runs, in window order, `workers` windows at a time."""
    e = evaluation
    per_window = e.runs() // len(e.starts)
    done: list[list[RevisitResult]] = []
    if e.workers > 1 and len(e.starts) > 1:
        with ProcessPoolExecutor(min(e.workers, len(e.starts))) as pool:
            for results in pool.map(_window, [e] * len(e.starts), e.starts):
                done.append(results)
                if progress is not None:
                    progress(per_window)
    else:
        for start in e.starts:
            done.append(_window(e, start))
            if progress is not None:
                progress(per_window)
    return [r for results in done for r in results]


def best_constants(results: Iterable[RevisitResult]) -> dict[tuple[int, str], str]:
    """Per (download rate, policy), the constants with the least mean delay among those
    within 0.5% of the most stories found over all windows and seeds (then the first in
    order)."""
    totals: dict[tuple[int, str], dict[str, list[RevisitResult]]] = {}
    for r in results:
        totals.setdefault((r.download_ms, r.policy), {}).setdefault(r.constants, []).append(r)
    best = {}
    for key, by_constants in totals.items():
        found = {c: sum(r.found for r in rows) for c, rows in by_constants.items()}
        delay = {c: _mean_delay(rows) for c, rows in by_constants.items()}
        most = max(found.values())
        close = [c for c in by_constants if found[c] >= 0.995 * most]
        best[key] = min(close, key=lambda c: delay[c])
    return best


def _mean_delay(rows: Sequence[RevisitResult]) -> float:
    """The mean of the runs' mean delays; infinite when no run found anything."""
    delays = [r.delay_min for r in rows if not math.isnan(r.delay_min)]
    return float(np.mean(delays)) if delays else math.inf
