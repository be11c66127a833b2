"""The operator's page's memory: a bounded summary of a running job, kept by the engine.

`LiveSummary` is a `StepObserver`: after every committed step the engine hands it the
step's frontier changes, dead letters, ScalingDecisions and counters, and it folds them
into ring buffers of per-second rates, a bounded set of top-priority entries, per-host
counts of queued URLs, the latest decisions per fetcher and the latest dead letters per
reason. Its size does not grow with the crawl (every part has a cap), it reads nothing
from the state store, and `snapshot` gives a JSON-ready picture for the page. The engine's
thread writes and the HTTP server's threads read, under one lock.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frontierflow.pipelines.embedded.observer import StepReport
from frontierflow.pipelines.ui.tracking import QueuedByHost, SecondSeries, TopEntries
from frontierflow.schemas.records import (
    DeadLetter,
    FrontierChange,
    FrontierEntry,
    Removal,
    ScalingDecision,
    change_key,
)
from frontierflow.state.hosts import HostState
from frontierflow.state.relevance import Judge


@dataclass(frozen=True, slots=True)
class SummarySettings:
    """How much the summary keeps; every part of it is bounded by one of these."""

    window_s: int = 300
    """Seconds of per-second history behind every rate chart."""
    top_entries: int = 25
    """Top-priority frontier entries shown."""
    top_hosts: int = 15
    """Hosts with the most queued URLs shown."""
    tracked_urls: int = 250_000
    """Queued frontier keys counted per host; past this, new ones are not counted."""
    fetchers: int = 32
    """Fetchers whose decisions are kept (the most recently heard from)."""
    decisions_per_fetcher: int = 60
    dead_reasons: int = 50
    """Distinct dead-letter reasons kept (the rest are counted under `other`)."""
    dead_samples: int = 5
    """Latest dead letters kept per reason."""
    sample_chars: int = 300
    """Characters of a dead letter's message and raw bytes kept."""
    harvest_bucket_s: int = 10
    judge: Judge | None = None
    """The relevance judge's threshold for the harvest rate; None: the paper's 0.75."""

    def __post_init__(self) -> None:
        sizes = (
            self.window_s,
            self.top_entries,
            self.top_hosts,
            self.tracked_urls,
            self.fetchers,
            self.decisions_per_fetcher,
            self.dead_reasons,
            self.dead_samples,
            self.sample_chars,
            self.harvest_bucket_s,
        )
        if min(sizes) < 1:
            raise ValueError("every summary size must be >= 1")
        if self.window_s % self.harvest_bucket_s:
            raise ValueError("the harvest bucket must divide the window")


def _text_sample(data: bytes | str, limit: int) -> str:
    """At most `limit` characters of `data`, bytes read as UTF-8 with replacement: shown as
    text by the page (which escapes it), never interpreted."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return text if len(text) <= limit else text[:limit] + "…"


def _finite(value: float) -> float | None:
    """JSON has no NaN or infinity: such a value is shown as missing."""
    return value if math.isfinite(value) else None


class LiveSummary:
    """See the module docstring. `clock` gives wall seconds (tests pass their own)."""

    def __init__(
        self,
        *,
        command: str,
        strategy: str,
        judges_pages: bool,
        settings: SummarySettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = s = settings if settings is not None else SummarySettings()
        self.clock = clock
        self.lock = threading.Lock()
        self.command = command
        self.strategy = strategy
        self.judges_pages = judges_pages
        self.judge = s.judge if s.judge is not None else Judge()
        self.instance = uuid.uuid4().hex
        """Tells the page that the job it polls was restarted."""
        self.started_at = clock()
        w = s.window_s
        self.rates = {
            name: SecondSeries(w)
            for name in ("events", "duplicates", "entries", "removals", "dead_letters")
        }
        self.judged = SecondSeries(w)
        self.relevant = SecondSeries(w)
        self.lag = SecondSeries(w)
        self.step_ms = SecondSeries(w)
        self.totals: dict[str, int] = dict.fromkeys(
            ("events", "duplicates", "entries", "removals", "dead_letters", "decisions", "steps"), 0
        )
        self.dead_counts: dict[str, int] = {}
        self.judged_total = 0
        self.relevant_total = 0
        self.last_lag: int | None = None
        self.last_step_ms: float | None = None
        self.top_entries = TopEntries(s.top_entries)
        self.queues = QueuedByHost(s.tracked_urls)
        self.fetchers: OrderedDict[str, deque[ScalingDecision]] = OrderedDict()
        self.dead: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self.pauses: dict[str, HostState] = {}
        """Queue group key → its state, for the groups a step found paused (kept while the
        pause may still run; the page shows those whose pause has not ended)."""
        self._last_counts: dict[str, int] = {}

    # -- written by the engine's thread ---------------------------------------------------

    def step_committed(self, report: StepReport) -> None:
        now = int(self.clock())
        with self.lock:
            self._counts(now, report)
            self._changes(report.changes)
            self._decisions(report.decisions)
            self._dead_letters(report.dead_letters)
            self._similarities(now, report.similarities)
            self._pauses(report.hosts)
            ms = report.seconds * 1000.0
            self.step_ms.peak(now, ms)
            self.last_step_ms = ms

    def input_lag(self, records: int) -> None:
        now = int(self.clock())
        with self.lock:
            self.lag.set(now, records)
            self.last_lag = records

    def _counts(self, now: int, report: StepReport) -> None:
        stats = report.stats
        counts = {
            "events": stats.events,
            "duplicates": stats.duplicates,
            "entries": stats.entries,
            "removals": stats.removals,
            "dead_letters": stats.dead_letters,
        }
        last = self._last_counts
        for name, value in counts.items():
            self.rates[name].add(now, value - last.get(name, 0))
        self._last_counts = counts
        self.totals = {**counts, "decisions": stats.decisions, "steps": stats.steps}
        self.dead_counts = dict(stats.dead_reasons)

    def _changes(self, changes: Sequence[FrontierChange]) -> None:
        """Fold a step's changes into the host queues and the top entries. The hot loop of
        the page (a step has thousands of changes): the common cases — an update of a key
        already queued, below the top's floor — are handled inline, the rest by the
        `QueuedByHost` and `TopEntries` methods."""
        top, queues = self.top_entries, self.queues
        candidates, tracked = top.candidates, queues.hosts
        for change in changes:
            if type(change) is Removal:
                url = change.url
                if url in tracked or url in queues.replies:
                    queues.gone(url)
                if url in candidates or url in top.replies:
                    top.drop(url)
                    candidates = top.candidates
                continue
            assert type(change) is FrontierEntry
            key = change_key(change)
            if key not in tracked:
                queues.queued(key, change.url, change.host)
            if change.priority > top.floor or key in candidates:
                top.put(key, change)
                candidates = top.candidates  # a prune builds a new dict

    def _pauses(self, hosts: Mapping[str, HostState]) -> None:
        for key, state in hosts.items():
            if state.paused_until:
                self.pauses[key] = state
        if len(self.pauses) > self.settings.top_hosts * 4:  # keep the latest pauses only
            latest = sorted(self.pauses.items(), key=lambda kv: -kv[1].paused_until)
            self.pauses = dict(latest[: self.settings.top_hosts * 4])

    def _decisions(self, decisions: Iterable[ScalingDecision]) -> None:
        fetchers = self.fetchers
        for decision in decisions:
            kept = fetchers.get(decision.fetcher_id)
            if kept is None:
                kept = deque(maxlen=self.settings.decisions_per_fetcher)
                fetchers[decision.fetcher_id] = kept
                if len(fetchers) > self.settings.fetchers:
                    fetchers.popitem(last=False)
            else:
                fetchers.move_to_end(decision.fetcher_id)
            kept.append(decision)

    def _dead_letters(self, letters: Iterable[DeadLetter]) -> None:
        s = self.settings
        for letter in letters:
            reason = letter.error_class
            samples = self.dead.get(reason)
            if samples is None:
                if len(self.dead) >= s.dead_reasons:
                    reason = "other"
                samples = self.dead.setdefault(reason, deque(maxlen=s.dead_samples))
            samples.append(
                {
                    "source": _text_sample(letter.source, s.sample_chars),
                    "partition": letter.partition,
                    "offset": letter.offset,
                    "message": _text_sample(letter.message, s.sample_chars),
                    "raw": _text_sample(letter.raw, s.sample_chars),
                    "raw_bytes": len(letter.raw),
                    "seen_at": self.clock(),
                }
            )

    def _similarities(self, now: int, similarities: Sequence[float]) -> None:
        if not similarities:
            return
        cut = self.judge.threshold - self.judge.tolerance
        relevant = sum(1 for sim in similarities if sim >= cut)
        self.judged.add(now, len(similarities))
        self.relevant.add(now, relevant)
        self.judged_total += len(similarities)
        self.relevant_total += relevant

    # -- read by the HTTP server's threads ------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The page's data: plain JSON values only (no NaN), built under the lock."""
        at = self.clock()
        now = int(at)
        with self.lock:
            return {
                "job": {
                    "command": self.command,
                    "strategy": self.strategy,
                    "instance": self.instance,
                    "started_at": self.started_at,
                    "now": at,
                },
                "totals": dict(self.totals),
                "rates": {
                    "window_s": self.settings.window_s,
                    **{name: series.last(now) for name, series in self.rates.items()},
                },
                "frontier": self._frontier(),
                "harvest": self._harvest(now),
                "fetchers": self._fetchers(),
                "paused_hosts": self._paused(at),
                "dead_letters": self._dead(),
                "lag": {"last": self.last_lag, "per_second": self.lag.last_known(now)},
                "step": {"last_ms": self.last_step_ms, "max_ms": self.step_ms.last_known(now)},
            }

    def _frontier(self) -> dict[str, Any]:
        queues = self.queues
        return {
            "queued": queues.size(),
            "tracked_cap": queues.cap,
            "full": queues.full,
            "top_hosts": [
                {"host": host, "queued": n} for host, n in queues.top(self.settings.top_hosts)
            ],
            "top_entries": [
                {
                    "url": e.url,
                    "host": e.host,
                    "priority": _finite(e.priority),
                    "strategy": e.strategy,
                    "cycle": e.cycle,
                    "via": e.via,
                    "echo": dict(sorted(e.echo.items())),
                }
                for e in self.top_entries.top()
            ],
        }

    def _harvest(self, now: int) -> dict[str, Any] | None:
        if not self.judges_pages:
            return None
        bucket = self.settings.harvest_bucket_s
        judged, relevant = self.judged.last(now), self.relevant.last(now)
        shares: list[float | None] = []
        for start in range(0, len(judged), bucket):
            seen = sum(v or 0.0 for v in judged[start : start + bucket])
            hits = sum(v or 0.0 for v in relevant[start : start + bucket])
            shares.append(hits / seen if seen else None)
        return {
            "threshold": self.judge.threshold,
            "judged": self.judged_total,
            "relevant": self.relevant_total,
            "bucket_s": bucket,
            "share": shares,
        }

    def _fetchers(self) -> list[dict[str, Any]]:
        return [
            {
                "fetcher_id": fetcher_id,
                "decisions": [
                    {
                        "window_start": d.window_start,
                        "window_end": d.window_end,
                        "pages": d.pages,
                        "crawl_speed": _finite(d.crawl_speed),
                        "speed_mean": _finite(d.speed_mean),
                        "speed_stddev": _finite(d.speed_stddev),
                        "e_cs": _finite(d.e_cs),
                        "e_cs_sign": d.e_cs_sign,
                        "threads_before": d.threads_before,
                        "threads_after": d.threads_after,
                        "learning": d.learning,
                        "reason": d.reason,
                    }
                    for d in decisions
                ],
            }
            for fetcher_id, decisions in sorted(self.fetchers.items())
        ]

    def _paused(self, at: float) -> list[dict[str, Any]]:
        """Hosts paused now (wall clock), the longest pause first."""
        now_ms = int(at * 1000)
        paused = [(key, s) for key, s in self.pauses.items() if s.paused(now_ms)]
        paused.sort(key=lambda kv: (-kv[1].paused_until, kv[0]))
        out = []
        for key, s in paused:
            crawl_id, _, host = key.partition("\x00")
            out.append(
                {
                    "host": host,
                    "crawl_id": crawl_id,
                    "reason": s.reason,
                    "until": s.paused_until,
                    "level": s.level,
                    "pauses": s.pauses,
                }
            )
        return out

    def _dead(self) -> list[dict[str, Any]]:
        counts = dict(self.dead_counts)
        reasons = sorted(set(counts) | set(self.dead), key=lambda r: (-counts.get(r, 0), r))
        return [
            {
                "reason": reason,
                "count": counts.get(reason, 0),
                "samples": list(reversed(self.dead.get(reason, ()))),
            }
            for reason in reasons
        ]
