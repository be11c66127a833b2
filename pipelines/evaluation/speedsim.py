"""A simulated fetcher whose throughput is bounded by a measured bandwidth trace.

A discrete-event simulation (no wall clock, no sleeps) of one fetcher with a pool of
threads crawling a set of polite hosts over one shared link. The link's capacity follows a
`time_s<TAB>Mbps` trace (FCC or Norway 3G from Pensieve's set, or the user's own); the
threads obey the `ScalingDecision`s of a controller that sees only the `FetchEvent`s the
fetcher emits, exactly as the real loop through Kafka would. The simulation records the
capacity it offered, the bytes it delivered and the politeness it kept.

Modelling choices (none comes from Nandy, Sarkar & Das 2012; each is a parameter of
`SimSettings`):
- the link is shared equally by the transfers in flight (processor sharing, TCP's
  long-run fairness), so per-request latency grows when the link is saturated: a transfer
  of b bytes with k others in flight takes b·(k+1)/C seconds of the link;
- each request first waits a server/RTT latency, lognormal with median 0.4 s and
  σ = 0.5 (a connection set-up plus server think time of a typical web page);
- page sizes are lognormal with median 30 kB and σ = 1.0 (mean ≈ 49 kB), clipped to
  [1 kB, 2 MB]: roughly the spread of HTML transfer sizes on the web;
- a request that has not finished 10 s after it started times out (status −1, no page);
  the bytes it already took from the link are wasted (the cost of hammering a slow link);
- 40 hosts, each allowing 1 or 2 concurrent requests (drawn at random): the scheduler
  hands a free thread the next host in round-robin order with a free slot and never
  exceeds a host's allowance; it counts violations anyway, so a report can prove zero;
- the trace is piecewise constant (each sample holds until the next) and loops when the
  simulation is longer than the trace (as Pensieve's simulator does).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from frontierflow.schemas.records import FetchEvent, ScalingDecision


class TraceError(ValueError):
    """A bandwidth trace that cannot be read (with the file and line)."""


@dataclass(frozen=True)
class BandwidthTrace:
    """Capacity over time: `mbps[i]` holds from `times[i]` until `times[i + 1]`."""

    name: str
    times: np.ndarray  # seconds from the start, increasing, times[0] == 0
    mbps: np.ndarray
    period: float  # length of one pass; the trace loops after it

    def index_at(self, t: float) -> int:
        """The sample in force at time t (looping)."""
        u = t % self.period
        return int(np.searchsorted(self.times, u, side="right")) - 1

    def bytes_per_s(self, t: float) -> float:
        return float(self.mbps[self.index_at(t)]) * 125_000.0

    def next_change(self, t: float) -> float:
        """The first time after t at which the capacity may change."""
        base = t - t % self.period
        i = self.index_at(t)
        nxt = self.times[i + 1] if i + 1 < len(self.times) else self.period
        at = base + float(nxt)
        return at if at > t else math.nextafter(t, math.inf)  # rounding at a loop's seam

    def scaled(self, rate_scale: float = 1.0, speedup: float = 1.0) -> BandwidthTrace:
        """The same trace with every rate × `rate_scale` and time compressed by `speedup`
        (a sample at t s comes at t / speedup s): a shaped crawl of a real site whose pages
        are larger or smaller than the trace's world, or one that must end sooner."""
        if not (rate_scale > 0 and speedup > 0):
            raise ValueError(f"rate_scale and speedup must be > 0, got {rate_scale}, {speedup}")
        return BandwidthTrace(
            self.name, self.times / speedup, self.mbps * rate_scale, self.period / speedup
        )

    def capacity_bytes(self, start: float, end: float) -> float:
        """∫ capacity dt over [start, end): the bytes the link could have carried."""
        total, t = 0.0, start
        while t < end:
            nxt = min(self.next_change(t), end)
            total += self.bytes_per_s(t) * (nxt - t)
            t = nxt if nxt > t else math.nextafter(t, math.inf)
        return total


def read_trace(path: Path) -> BandwidthTrace:
    """A `time_s throughput_Mbps` file: whitespace-separated, no header, `#` comments and
    blank lines ignored; times must increase, throughputs be finite and >= 0."""
    times: list[float] = []
    mbps: list[float] = []
    with Path(path).open() as f:
        for number, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            fields = text.split()
            try:
                t, v = float(fields[0]), float(fields[1])
            except (IndexError, ValueError) as exc:
                raise TraceError(f"{path}:{number}: expected 'time_s Mbps', got {text!r}") from exc
            if not (math.isfinite(t) and math.isfinite(v) and v >= 0.0):
                raise TraceError(f"{path}:{number}: time and Mbps must be finite, Mbps >= 0")
            if times and t <= times[-1]:
                raise TraceError(f"{path}:{number}: time {t} does not increase")
            times.append(t)
            mbps.append(v)
    if len(times) < 2:
        raise TraceError(f"{path}: a trace needs at least two samples")
    start = times[0]
    rel = np.array(times) - start
    step = float(np.median(np.diff(rel)))
    return BandwidthTrace(Path(path).name, rel, np.array(mbps), float(rel[-1]) + step)


def find_traces(path: Path) -> list[Path]:
    """A trace file, or every trace file under a folder (manifests and dotfiles skipped)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no trace file or folder at {path}")
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not p.name.startswith(".") and p.suffix not in (".tsv", ".md")
    )


@dataclass(frozen=True, slots=True)
class SimSettings:
    """The simulated world (all modelling choices, see the module docstring)."""

    seed: int = 0
    duration_s: float | None = None  # None: one pass of the trace
    fetcher_id: str = "fetcher-0"
    hosts: int = 40
    host_limits: tuple[int, ...] = (1, 2)
    page_median_bytes: float = 30_000.0
    page_sigma: float = 1.0
    page_min_bytes: int = 1_000
    page_max_bytes: int = 2_000_000
    latency_median_s: float = 0.4
    latency_sigma: float = 0.5
    timeout_s: float = 10.0
    enforce_politeness: bool = True  # False only to test the violation counter

    def __post_init__(self) -> None:
        if self.hosts < 1 or not self.host_limits or min(self.host_limits) < 1:
            raise ValueError("need hosts >= 1 and host limits >= 1")
        if not (self.page_median_bytes > 0 and self.latency_median_s >= 0 and self.timeout_s > 0):
            raise ValueError("page size, latency and timeout must be positive")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ValueError(f"duration_s must be > 0, got {self.duration_s}")

    @property
    def mean_page_bytes(self) -> float:
        """Mean of the (unclipped) lognormal page size: median·e^(σ²/2)."""
        return self.page_median_bytes * math.exp(self.page_sigma**2 / 2.0)


Controller = Callable[[FetchEvent], list[ScalingDecision]]
"""Given each event the fetcher emits, the decisions it must obey from now on."""


@dataclass
class SimResult:
    """What one simulated crawl did."""

    trace: str
    duration_s: float
    events: list[FetchEvent] = field(default_factory=list)
    decisions: list[ScalingDecision] = field(default_factory=list)
    pages: int = 0
    failures: int = 0
    useful_bytes: int = 0
    capacity_bytes: float = 0.0
    violations: int = 0
    capacity_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    delivered_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class _Request:
    rid: int
    thread: int
    host: int
    size: int
    start: float
    alive: bool = True
    transferring: bool = False


def simulate_fetcher(
    trace: BandwidthTrace,
    controller: Controller,
    initial_threads: int,
    settings: SimSettings,
) -> SimResult:
    """Run one fetcher on `trace` under `controller`; deterministic for a given seed."""
    return _Simulation(trace, controller, initial_threads, settings).run()


class _Simulation:
    """The event loop. Times are float seconds from the trace's start."""

    def __init__(
        self, trace: BandwidthTrace, controller: Controller, threads: int, s: SimSettings
    ) -> None:
        self.trace, self.controller, self.s = trace, controller, s
        self.rng = np.random.default_rng(s.seed)
        self.end = s.duration_s if s.duration_s is not None else trace.period
        self.limits = [int(x) for x in self.rng.choice(np.array(s.host_limits), size=s.hosts)]
        self.host_active = [0] * s.hosts
        self.next_host = 0
        self.target = threads
        self.live = 0
        self.blocked: list[int] = []  # threads waiting for a host slot
        self.next_thread = 0
        self.t = 0.0
        self.service = 0.0  # bytes each in-flight transfer has received (processor sharing)
        self.finish: list[tuple[float, int]] = []  # (service at which it completes, rid)
        self.in_flight = 0
        self.latency_heap: list[tuple[float, int]] = []
        self.deadline_heap: list[tuple[float, int]] = []
        self.requests: dict[int, _Request] = {}
        self.next_rid = 0
        self.result = SimResult(trace.name, self.end)
        self.delivered = np.zeros(math.ceil(self.end) + 1)

    # -- scheduling ------------------------------------------------------------------

    def _pick_host(self) -> int | None:
        """Round-robin over hosts with a free slot (politeness), or None if all are full."""
        for k in range(self.s.hosts):
            h = (self.next_host + k) % self.s.hosts
            if self.host_active[h] < self.limits[h] or not self.s.enforce_politeness:
                self.next_host = (h + 1) % self.s.hosts
                return h
        return None

    def _start_request(self, thread: int) -> None:
        host = self._pick_host()
        if host is None:
            self.blocked.append(thread)
            return
        if self.host_active[host] >= self.limits[host]:
            self.result.violations += 1
        self.host_active[host] += 1
        size = float(self.rng.lognormal(math.log(self.s.page_median_bytes), self.s.page_sigma))
        size_i = round(min(max(size, self.s.page_min_bytes), self.s.page_max_bytes))
        latency = float(
            self.rng.lognormal(math.log(max(self.s.latency_median_s, 1e-9)), self.s.latency_sigma)
        )
        rid = self.next_rid
        self.next_rid += 1
        self.requests[rid] = _Request(rid, thread, host, size_i, self.t)
        heapq.heappush(self.latency_heap, (self.t + latency, rid))
        heapq.heappush(self.deadline_heap, (self.t + self.s.timeout_s, rid))

    def _spawn(self) -> None:
        while self.live < self.target:
            self.live += 1
            self.next_thread += 1
            self._start_request(self.next_thread)

    def _thread_free(self, thread: int) -> None:
        if self.live > self.target:
            self.live -= 1
            return
        self._start_request(thread)

    def _release_host(self, host: int) -> None:
        self.host_active[host] -= 1
        if self.blocked:
            waiting, self.blocked = self.blocked, []
            for thread in waiting:
                if self.live > self.target:
                    self.live -= 1
                else:
                    self._start_request(thread)

    # -- events ----------------------------------------------------------------------

    def _emit(self, req: _Request, status: int, nbytes: int) -> None:
        event = FetchEvent(
            url=f"https://host{req.host}.example/page/{req.rid}",
            fetched_at=int(self.t * 1000.0),
            status=status,
            fetcher_id=self.s.fetcher_id,
            host=f"host{req.host}.example",
            bytes=nbytes,
            fetch_ms=(self.t - req.start) * 1000.0,
        )
        self.result.events.append(event)
        decisions = self.controller(event)
        if decisions:
            self.result.decisions += decisions
            self.target = decisions[-1].threads_after
            self._spawn()

    def _complete(self, req: _Request) -> None:
        req.alive = False
        del self.requests[req.rid]
        self.in_flight -= 1
        self.result.pages += 1
        self.result.useful_bytes += req.size
        self.delivered[min(int(self.t), len(self.delivered) - 1)] += req.size
        self._release_host(req.host)
        self._emit(req, 200, req.size)
        self._thread_free(req.thread)

    def _timeout(self, req: _Request) -> None:
        req.alive = False
        del self.requests[req.rid]
        if req.transferring:
            self.in_flight -= 1
        self.result.failures += 1
        self._release_host(req.host)
        self._emit(req, -1, 0)
        self._thread_free(req.thread)

    def _begin_transfer(self, req: _Request) -> None:
        req.transferring = True
        self.in_flight += 1
        heapq.heappush(self.finish, (self.service + req.size, req.rid))

    def _advance(self, t_next: float, capacity: float) -> None:
        if self.in_flight:
            self.service += capacity / self.in_flight * (t_next - self.t)
        self.t = t_next

    def _drop_dead(self, heap: list[tuple[float, int]]) -> None:
        while heap and heap[0][1] not in self.requests:
            heapq.heappop(heap)

    def run(self) -> SimResult:
        self._spawn()
        inf = math.inf
        while self.t < self.end:
            capacity = self.trace.bytes_per_s(self.t)
            for heap in (self.finish, self.latency_heap, self.deadline_heap):
                self._drop_dead(heap)
            t_trace = self.trace.next_change(self.t)
            t_latency = self.latency_heap[0][0] if self.latency_heap else inf
            t_deadline = self.deadline_heap[0][0] if self.deadline_heap else inf
            t_finish = inf
            if self.finish and capacity > 0.0:
                t_finish = (
                    self.t + max(self.finish[0][0] - self.service, 0.0) * self.in_flight / capacity
                )
            t_next = min(t_trace, t_latency, t_deadline, t_finish, self.end)
            self._advance(max(t_next, self.t), capacity)
            if t_next >= self.end:
                break
            if t_next == t_finish:
                _, rid = heapq.heappop(self.finish)
                self._complete(self.requests[rid])
            elif t_next == t_deadline:
                _, rid = heapq.heappop(self.deadline_heap)
                self._timeout(self.requests[rid])
            elif t_next == t_latency:
                _, rid = heapq.heappop(self.latency_heap)
                self._begin_transfer(self.requests[rid])
        return self._finish_result()

    def _finish_result(self) -> SimResult:
        r = self.result
        r.capacity_bytes = self.trace.capacity_bytes(0.0, self.end)
        seconds = math.ceil(self.end)
        r.capacity_per_s = np.array(
            [self.trace.capacity_bytes(i, min(i + 1.0, self.end)) for i in range(seconds)]
        )
        r.delivered_per_s = self.delivered[:seconds]
        return r
