"""What a real crawl through a shaped link did with the bandwidth it had, beside what the
speed simulator (`speedsim`) does on the same trace.

Read from the shaper's log (`shaping.ShapeLog`: the rates applied and the link's byte
counter), the web server's access log (body bytes per request), the FetchEvents and the
ScalingDecisions of the crawl:
- capacity share on the wire: bytes the link carried ÷ ∫ rate dt while the trace played
  (frames, so TCP/IP headers count as used);
- capacity share in pages: body bytes of the requests that ended while it played ÷ the same
  ∫ rate dt (what the simulator's "capacity used" counts: page bytes only);
- per window (whole windows from the first rate applied): the capacity, the bytes the link
  carried (its counter at the samples nearest the window's ends), the pages fetched and the
  threads the controller had set by the window's end.

The simulator runs the same (scaled) trace twice with the same controller settings: in its
own world (40 hosts, `SimSettings` defaults, as in docs/RESULTS.md) and in one fitted to the
real crawl (its hosts, one request at a time each, the politeness delay as the latency, page
sizes lognormal with the median and spread of the bodies served).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from frontierflow.pipelines.evaluation.realcrawl import AccessLine
from frontierflow.pipelines.evaluation.shaping import ShapeLog
from frontierflow.pipelines.evaluation.speed import RunMetrics, make_controller, run_metrics
from frontierflow.pipelines.evaluation.speedsim import BandwidthTrace, SimSettings, simulate_fetcher
from frontierflow.pipelines.speed.controllers import initial_controller
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent, ScalingDecision


@dataclass(frozen=True, slots=True)
class ShapedWindow:
    start_s: float
    """Seconds after the first rate was applied."""
    capacity_mbps: float
    carried_mbps: float
    """Bytes the link carried in the window (frames), per second, in Mbit/s."""
    pages: int
    threads: int | None
    """Threads the last decision published by the window's end had set (None: none yet)."""


@dataclass(frozen=True, slots=True)
class ShapedCrawl:
    seconds: float
    downloads: int
    allowed_bytes: float
    wire_bytes: int
    page_bytes: int
    windows: tuple[ShapedWindow, ...]
    decisions: int
    thread_changes: int

    @property
    def pages_per_s(self) -> float:
        return self.downloads / self.seconds if self.seconds else 0.0

    @property
    def wire_share(self) -> float:
        return self.wire_bytes / self.allowed_bytes if self.allowed_bytes else 0.0

    @property
    def page_share(self) -> float:
        return self.page_bytes / self.allowed_bytes if self.allowed_bytes else 0.0


def shaped_crawl(
    shape: ShapeLog,
    requests: Sequence[AccessLine],
    events: Sequence[FetchEvent],
    decisions: Sequence[ScalingDecision],
    window_s: float = 10.0,
) -> ShapedCrawl:
    """The crawl between the first rate applied and the end of the trace's pass."""
    start, stop = shape.samples[0].at, shape.stop
    during = [r for r in requests if start <= r.end < stop]
    fetched = [
        e for e in events if e.status != ALREADY_FETCHED and start <= e.fetched_at / 1000 < stop
    ]
    ordered = sorted(decisions, key=lambda d: d.window_end)
    windows = []
    for i in range(int((stop - start) // window_s)):
        lo, hi = start + i * window_s, start + (i + 1) * window_s
        made = [d for d in ordered if d.window_end / 1000 <= hi]
        windows.append(
            ShapedWindow(
                start_s=i * window_s,
                capacity_mbps=shape.allowed_bytes(lo, hi) / (hi - lo) / 125_000.0,
                carried_mbps=(shape.sent_at(hi) - shape.sent_at(lo)) / (hi - lo) / 125_000.0,
                pages=sum(lo <= e.fetched_at / 1000 < hi for e in fetched),
                threads=made[-1].threads_after if made else None,
            )
        )
    return ShapedCrawl(
        seconds=stop - start,
        downloads=len(fetched),
        allowed_bytes=shape.allowed_bytes(start, stop),
        wire_bytes=shape.delivered_bytes(),
        page_bytes=sum(r.bytes for r in during),
        windows=tuple(windows),
        decisions=len(ordered),
        thread_changes=sum(d.threads_after != d.threads_before for d in ordered),
    )


def fitted_world(requests: Sequence[AccessLine], delay_s: float, seed: int = 0) -> SimSettings:
    """The simulator's world fitted to a real crawl (see the module docstring)."""
    sizes = [math.log(r.bytes) for r in requests if r.status == 200 and r.bytes > 0]
    if len(sizes) < 2:
        raise ValueError("need at least two pages served to fit page sizes")
    return SimSettings(
        seed=seed,
        hosts=len({r.host for r in requests}),
        host_limits=(1,),
        page_median_bytes=math.exp(statistics.fmean(sizes)),
        page_sigma=statistics.pstdev(sizes),
        latency_median_s=delay_s,
        latency_sigma=0.0,
    )


def simulated(
    trace: BandwidthTrace, settings: ControllerSettings, world: SimSettings, label: str
) -> RunMetrics:
    """One simulated crawl of one pass of `trace` under the controller `settings`."""
    _, control = make_controller(settings)
    result = simulate_fetcher(trace, control, initial_controller(settings).threads, world)
    return run_metrics(result, label, float(sum(trace.mbps) / len(trace.mbps)))
