"""A fetcher's crawl-speed state (Nandy, Sarkar & Das 2012) and its binary encoding.

The records the speed operator keeps per fetcher: the integer sums of one event-time
window (`SpeedWindow`), running speed statistics (`Welford`, eqs. 2 and 7), the
controller's memory between windows (`ControllerState`) and all of it with the fetcher's
watermark (`SpeedState`). The encoding is a fixed big-endian struct layout (no pickle);
wrong bytes raise `StateCodecError`. How events change these records lives in
`frontierflow.pipelines.speed`.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

from frontierflow.state.storage.codec import StateCodecError

HOST_SAMPLE = 64
"""Distinct hosts remembered per window (the smallest hashes, so the sample does not depend
on arrival order). With this many hosts the politeness cap no longer binds below 64 threads."""

NO_WATERMARK = -(2**63)
"""The watermark of a fetcher before its first event."""


@dataclass(frozen=True, slots=True)
class SpeedWindow:
    """What one fetcher did in the event-time window [start_ms, end_ms).

    Sums only (integers), so windows combine in any order to the same value: Beam's
    CombineFn and the embedded fold agree bit for bit.
    """

    start_ms: int
    end_ms: int
    pages: int = 0  # events with an HTTP answer that is not a back-off (eq. 1's V_i)
    failures: int = 0  # transport errors (status <= 0) and 429/503 back-off answers
    bytes: int = 0
    fetch_us: int = 0  # sum of fetch_ms of all events, in integer microseconds
    events: int = 0
    hosts: tuple[int, ...] = ()  # sorted smallest HOST_SAMPLE host hashes


@dataclass(frozen=True, slots=True)
class Welford:
    """Running mean and squared deviation of crawl speeds (Nandy, Sarkar & Das 2012,
    eqs. 2 and 7).

    Welford's update, not eq. 6–7's M·Σc² − (Σc)², which cancels catastrophically when the
    speeds are large and close together."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> Welford:
        n = self.n + 1
        delta = x - self.mean
        mean = self.mean + delta / n
        return Welford(n, mean, self.m2 + delta * (x - mean))

    @property
    def stddev(self) -> float:
        """ξ_cs of eq. 7: the population deviation (divide by M, as the paper does)."""
        return math.sqrt(max(self.m2, 0.0) / self.n) if self.n else 0.0


@dataclass(frozen=True, slots=True)
class ControllerState:
    """What a fetcher's controller remembers between windows."""

    threads: int
    learning: bool = True
    history: Welford = field(default_factory=Welford)  # speeds at the current thread count
    overall: Welford = field(default_factory=Welford)  # all speeds (the literal variant's M)
    last_speed: float = -1.0  # speed of the last closed window, −1 before the first
    l_ecs: tuple[int, ...] = ()  # L_ecs: the latest f(E_cs) values while learning
    stable_speed: float = 0.0  # stored when learning stops (the paper's local DB)
    peak_speed: float = 0.0  # the highest stable speed stored, for the critic's recovery
    sum_xi: float = 0.0  # Σ of earlier ξ (literal eq. 8)
    delay_s: float = 0.0  # AutoThrottle's download delay
    latency_floor_ms: float = 0.0  # AutoThrottle: lowest window mean latency seen
    windows: int = 0


@dataclass(frozen=True, slots=True)
class SpeedState:
    """One fetcher's state: its watermark, open windows and controller."""

    fetcher_id: str
    controller: ControllerState
    watermark: int = NO_WATERMARK
    open_windows: tuple[SpeedWindow, ...] = ()  # sorted by start
    late_events: int = 0


# --- codec -----------------------------------------------------------------------------

_VERSION = 1
_HEAD = struct.Struct(">BHqQ")  # version, fetcher id length, watermark, late events
_CTRL = struct.Struct(">i?" + "Idd" * 2 + "ddddddQ")
_WINDOW = struct.Struct(">qqIIQQIH")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")


def encode_speed_state(s: SpeedState) -> bytes:
    """Big-endian fixed layout: head, fetcher id, controller, L_ecs, windows with hosts;
    values that do not fit it (a counter past its field) raise `StateCodecError`."""
    try:
        return _encode(s)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode a SpeedState of {s.fetcher_id!r}: {exc}") from exc


def _encode(s: SpeedState) -> bytes:
    fid = s.fetcher_id.encode()
    c = s.controller
    parts = [
        _HEAD.pack(_VERSION, len(fid), s.watermark, s.late_events),
        fid,
        _CTRL.pack(
            c.threads,
            c.learning,
            c.history.n,
            c.history.mean,
            c.history.m2,
            c.overall.n,
            c.overall.mean,
            c.overall.m2,
            c.last_speed,
            c.stable_speed,
            c.peak_speed,
            c.sum_xi,
            c.delay_s,
            c.latency_floor_ms,
            c.windows,
        ),
        _U8.pack(len(c.l_ecs)),
        struct.pack(f">{len(c.l_ecs)}b", *c.l_ecs),
        _U16.pack(len(s.open_windows)),
    ]
    for w in s.open_windows:
        parts.append(
            _WINDOW.pack(
                w.start_ms,
                w.end_ms,
                w.pages,
                w.failures,
                w.bytes,
                w.fetch_us,
                w.events,
                len(w.hosts),
            )
        )
        parts.append(struct.pack(f">{len(w.hosts)}Q", *w.hosts))
    return b"".join(parts)


def decode_speed_state(b: bytes) -> SpeedState:
    """The inverse of `encode_speed_state`; wrong bytes raise `StateCodecError`."""
    try:
        return _decode(memoryview(b))
    except (struct.error, UnicodeDecodeError) as exc:
        raise StateCodecError(f"not an encoded SpeedState: {exc}") from exc


def _decode(b: memoryview) -> SpeedState:
    version, fid_len, watermark, late = _HEAD.unpack_from(b, 0)
    if version != _VERSION:
        raise StateCodecError(f"unknown SpeedState version {version}")
    pos = _HEAD.size
    fetcher_id = bytes(b[pos : pos + fid_len]).decode()
    pos += fid_len
    v = _CTRL.unpack_from(b, pos)
    pos += _CTRL.size
    (n_l,) = _U8.unpack_from(b, pos)
    pos += 1
    l_ecs = struct.unpack_from(f">{n_l}b", b, pos)
    pos += n_l
    (n_w,) = _U16.unpack_from(b, pos)
    pos += 2
    windows = []
    for _ in range(n_w):
        start, end, pages, failures, nbytes, fetch_us, events, n_h = _WINDOW.unpack_from(b, pos)
        pos += _WINDOW.size
        hosts = struct.unpack_from(f">{n_h}Q", b, pos)
        pos += 8 * n_h
        windows.append(SpeedWindow(start, end, pages, failures, nbytes, fetch_us, events, hosts))
    if pos != len(b):
        raise StateCodecError(f"{len(b) - pos} trailing bytes after a SpeedState")
    ctrl = ControllerState(
        threads=v[0],
        learning=v[1],
        history=Welford(v[2], v[3], v[4]),
        overall=Welford(v[5], v[6], v[7]),
        last_speed=v[8],
        l_ecs=tuple(l_ecs),
        stable_speed=v[9],
        peak_speed=v[10],
        sum_xi=v[11],
        delay_s=v[12],
        latency_floor_ms=v[13],
        windows=v[14],
    )
    return SpeedState(fetcher_id, ctrl, watermark, tuple(windows), late)
