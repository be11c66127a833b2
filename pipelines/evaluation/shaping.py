"""A network link shaped to follow a bandwidth trace, for a real crawl through it.

`ShapedLink` makes a network namespace joined to this one by a veth pair: a server started
inside it (`ShapedLink.run_inside`) answers on `ns_address`, and every byte it sends leaves
through the namespace's end of the pair, whose root qdisc is a token bucket filter
(`tc … tbf`). `replay_trace` plays a `time_s Mbps` trace on that link, optionally scaled and
time-compressed first (`BandwidthTrace.scaled`): at each sample it sets the bucket's rate,
and records the rate applied,
when, and the bytes the link had carried by then (the interface's transmit counter, which
does not reset when the qdisc changes). `ShapeLog` reads that record back: the bytes the
trace allowed (∫ rate dt over the times the rates were actually in force) against the bytes
delivered.

Linux only, as root (or with CAP_NET_ADMIN): `ip netns`, veth and the tbf qdisc (iproute2).
netem is not used: it is not available on every kernel. Only the traffic from the namespace
to this side is shaped (the answers of a server inside it), which is what bounds a crawl.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from frontierflow.pipelines.evaluation.speedsim import BandwidthTrace

log = logging.getLogger(__name__)

MIN_RATE_BITS = 8_000
"""tbf refuses a rate of 0: a trace sample of 0 Mbps (an outage) is shaped at 8 kbit/s."""
MTU_FRAME = 1_514
BURST_S = 0.01
"""The bucket holds 10 ms of the rate, and at least one full frame (tbf cannot send a
larger packet). Every rate change refills it (the kernel's tbf_change), so a trace sampled
every 0.5 s lets through up to one bucket more per sample: kept small for that reason."""
QUEUE_LATENCY_MS = 200
"""How long a packet may wait in the bucket's queue before it is dropped (tbf `latency`):
a 3G link's buffers hold a few hundred milliseconds."""


class ShapingError(RuntimeError):
    """A command that sets up or changes the shaped link failed (with its stderr)."""


def _run(args: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ShapingError(f"{' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        raise ShapingError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def tbf_args(mbps: float) -> list[str]:
    """The tbf parameters for a rate of `mbps` (see MIN_RATE_BITS, BURST_S,
    QUEUE_LATENCY_MS)."""
    bits = max(MIN_RATE_BITS, round(mbps * 1_000_000))
    burst = max(MTU_FRAME, round(bits / 8 * BURST_S))
    return ["tbf", "rate", f"{bits}bit", "burst", str(burst), "latency", f"{QUEUE_LATENCY_MS}ms"]


@dataclass(frozen=True, slots=True)
class ShapedLink:
    """A namespace `netns` whose device `ns_device` (address `ns_address`) is joined to
    `host_device` (address `host_address`) here; `create` makes it, `close` removes it."""

    netns: str
    host_device: str
    ns_device: str
    host_address: str
    ns_address: str
    prefix: int

    @classmethod
    def create(
        cls,
        netns: str,
        host_address: str = "10.213.0.1",
        ns_address: str = "10.213.0.2",
        prefix: int = 30,
        mbps: float = 1000.0,
    ) -> ShapedLink:
        """The namespace, the pair (device names derived from `netns`, at most 15
        characters), addresses, both ends up, and a first rate of `mbps`. Whatever was made
        is removed again when a step fails."""
        tag = netns[-11:]
        link = cls(netns, f"ffh-{tag}", f"ffn-{tag}", host_address, ns_address, prefix)
        _run(["ip", "netns", "add", netns])
        try:
            _run(["ip", "link", "add", link.host_device, "type", "veth",
                  "peer", "name", link.ns_device, "netns", netns])  # fmt: skip
            _run(["ip", "addr", "add", f"{host_address}/{prefix}", "dev", link.host_device])
            _run(["ip", "link", "set", link.host_device, "up"])
            _run(["ip", "-n", netns, "addr", "add", f"{ns_address}/{prefix}",
                  "dev", link.ns_device])  # fmt: skip
            _run(["ip", "-n", netns, "link", "set", link.ns_device, "up"])
            _run(["ip", "-n", netns, "link", "set", "lo", "up"])
            link.set_rate(mbps)
        except ShapingError:
            link.close()
            raise
        return link

    def set_rate(self, mbps: float) -> None:
        """The rate of everything sent from the namespace from now on."""
        _run(["tc", "-n", self.netns, "qdisc", "replace", "dev", self.ns_device, "root",
              *tbf_args(mbps)])  # fmt: skip

    def sent_bytes(self) -> int:
        """Bytes the namespace's end has sent so far (frames, headers included)."""
        out = _run(["ip", "-n", self.netns, "-s", "-j", "link", "show", "dev", self.ns_device])
        return int(json.loads(out)[0]["stats64"]["tx"]["bytes"])

    def run_inside(self) -> list[str]:
        """The prefix that runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.netns]

    def close(self) -> None:
        """Removes the namespace, and with it the pair (idempotent). A process still
        running inside keeps its copy alive until it exits: stop servers first."""
        try:
            _run(["ip", "netns", "del", self.netns])
        except ShapingError as exc:
            log.debug("namespace %s already gone: %s", self.netns, exc)
        with contextlib.suppress(ShapingError):  # gone with the namespace, as it should be
            _run(["ip", "link", "del", self.host_device])


def shaping_refused(netns: str = f"ffprobe-{os.getpid()}") -> str | None:
    """Why a shaped link cannot be made here (no ip/tc, not allowed, no tbf), or None."""
    try:
        link = ShapedLink.create(netns, "10.213.255.1", "10.213.255.2")
    except ShapingError as exc:
        return str(exc)
    link.close()
    return None


@dataclass(frozen=True, slots=True)
class ShapeSample:
    """One rate applied: at `at` (epoch seconds), the trace's sample at `trace_s`, shaped
    at `mbps` (scaled); `sent_bytes` the link's counter just after."""

    at: float
    trace_s: float
    mbps: float
    sent_bytes: int


def write_sample(out: TextIO, kind: str, sample: ShapeSample) -> None:
    out.write(f"{kind}\t{sample.at:.3f}\t{sample.trace_s:.3f}\t{sample.mbps:.6g}\t"
              f"{sample.sent_bytes}\n")  # fmt: skip
    out.flush()


def replay_trace(
    link: ShapedLink,
    trace: BandwidthTrace,
    stop: threading.Event,
    on_sample: Callable[[str, ShapeSample], None],
    clock: Callable[[], float] = time.time,
) -> bool:
    """Apply each sample of one pass of `trace` (scaled and compressed beforehand with
    `BandwidthTrace.scaled`) at its time from now, calling `on_sample("sample", …)` after
    each, and `on_sample("end", …)` when the pass is over (the last rate stays in force).
    Returns False when `stop` was set first."""
    t0 = clock()
    for trace_s, mbps in zip(trace.times, trace.mbps, strict=True):
        if stop.wait(max(0.0, t0 + trace_s - clock())):
            return False
        link.set_rate(float(mbps))
        on_sample("sample", ShapeSample(clock(), float(trace_s), float(mbps), link.sent_bytes()))
    if stop.wait(max(0.0, t0 + trace.period - clock())):
        return False
    on_sample("end", ShapeSample(clock(), trace.period, math.nan, link.sent_bytes()))
    return True


@dataclass(frozen=True, slots=True)
class ShapeLog:
    """The samples a replay applied and the moment it ended, read back from its log."""

    samples: tuple[ShapeSample, ...]
    end: ShapeSample | None

    @classmethod
    def read(cls, path: Path) -> ShapeLog:
        samples: list[ShapeSample] = []
        end = None
        for line in Path(path).read_text().splitlines():
            if not line or line.startswith("#"):
                continue
            kind, at, trace_s, mbps, sent = line.split("\t")
            sample = ShapeSample(float(at), float(trace_s), float(mbps), int(sent))
            if kind == "end":
                end = sample
            else:
                samples.append(sample)
        return cls(tuple(samples), end)

    @property
    def stop(self) -> float:
        """When the replay ended (the last sample's time if it was cut short)."""
        return self.end.at if self.end is not None else self.samples[-1].at

    def allowed_bytes(self, start: float, end: float) -> float:
        """∫ rate dt over [start, end): the bytes the shaped link could have carried, each
        rate counted from when it was applied until the next one."""
        total = 0.0
        bounds = [s.at for s in self.samples[1:]] + [self.stop]
        for sample, until in zip(self.samples, bounds, strict=True):
            lo, hi = max(start, sample.at), min(end, until)
            if hi > lo:
                total += sample.mbps * 125_000.0 * (hi - lo)
        return total

    def sent_at(self, t: float) -> int:
        """The link's counter at the last sample (or the end) applied at or before `t`."""
        sent = self.samples[0].sent_bytes
        for sample in (*self.samples, *(() if self.end is None else (self.end,))):
            if sample.at > t:
                break
            sent = sample.sent_bytes
        return sent

    def delivered_bytes(self) -> int:
        """Bytes the link carried from the first sample to the end of the replay."""
        last = self.end if self.end is not None else self.samples[-1]
        return last.sent_bytes - self.samples[0].sent_bytes
