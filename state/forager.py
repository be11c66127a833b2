"""A forager of seeds 002/004 (Palotai, Farkas, Lőrincz 2005) as keyed state, and its encoding.

`ForagerState` is what one forager keeps: its kind (`Variant`), weight vector, weblog and
current path (`ForagerPath`); `encode_forager`/`decode_forager` give it a versioned binary
form. The transitions that walk a site and learn are in `frontierflow.state.foraging`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from frontierflow.state.codec import StateCodecError

Vector = npt.NDArray[np.float64]
Weblog = tuple[tuple[str, float], ...]
"""(url, weblog value) pairs in descending order of value; the first ones are the start list."""

HOUR_MS = 3_600_000


class Variant(StrEnum):
    """The forager kinds of seed 002 §4 (and the combination of its web experiment)."""

    WL = "wl"
    """Weblog update only; a fixed random weight vector (seed 002: "WL foragers")."""
    RL = "rl"
    """TD(0) URL-ordering update only; a fixed weblog (seed 002: "RL foragers")."""
    WLRL = "wlrl"
    """Both: the foragers of the 18-day web experiment."""

    @property
    def updates_weblog(self) -> bool:
        return self is not Variant.RL

    @property
    def updates_weights(self) -> bool:
        return self is not Variant.WL


def empty_matrix(dimensions: int) -> Vector:
    """A frontier of no URLs: zero state vectors of length `dimensions`."""
    return np.zeros((0, dimensions), dtype=np.float64)


@dataclass(slots=True)
class ForagerPath:
    """The current path: what was visited (with each step's reward) and the frontier."""

    visited: tuple[str, ...] = ()
    """URLs visited in this path, in order; `len(visited)` is the path step number."""
    rewards: tuple[float, ...] = ()
    """The reward (sum of reinforcements) received for each visited step."""
    frontier: tuple[str, ...] = ()
    """Linked, not yet visited URLs of this path, in discovery order."""
    frontier_x: Vector = field(default_factory=lambda: empty_matrix(50))
    """Row i is the state vector x of `frontier[i]` (known: its page was downloaded)."""
    current_x: Vector | None = None
    """x of the URL visited last (the TD state of the current step); None before it."""


@dataclass(slots=True)
class ForagerState:
    """Everything one forager keeps (its key is the forager id)."""

    forager_id: int
    variant: Variant
    weights: Vector
    """w: the estimated long-term profit of a document is w·x."""
    weblog: Weblog
    path: ForagerPath
    draws: int = 0
    """Uniform draws used so far (the counter of `uniform_draw`)."""


def forager_key(forager_id: int) -> str:
    """The key of a forager's state and of its random draws."""
    return f"forager:{forager_id}"


# --- codec -------------------------------------------------------------------------------
#
# Version 1, little-endian: u8 version, u8 variant (0 wl, 1 rl, 2 wlrl), u32 forager id,
# u32 draws, u16 dimensions d, d×f64 weights; u32 weblog length n, then per entry a u16
# url length, the UTF-8 url and an f64 value; the path: u16 visited count v, per step the
# url and an f64 reward; u8 has-current-x, d×f64 if set; u16 frontier size f, per entry
# the url and d×f64.

_VERSION = 1
_VARIANTS = (Variant.WL, Variant.RL, Variant.WLRL)
_HEAD = struct.Struct("<BBIIH")


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def pack(self, fmt: str, *values: float | int) -> None:
        try:
            self.out += struct.pack(fmt, *values)
        except struct.error as exc:
            raise StateCodecError(f"forager state field out of range: {exc}") from exc

    def text(self, value: str) -> None:
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise StateCodecError(f"forager URL is not valid Unicode: {exc}") from exc
        self.pack("<H", len(raw))
        self.out += raw

    def vector(self, values: Vector, dims: int) -> None:
        if values.shape != (dims,):
            raise StateCodecError(f"forager vector has shape {values.shape}, not ({dims},)")
        self.out += values.astype("<f8").tobytes()


class Reader:
    """A cursor over encoded state that raises StateCodecError instead of running past."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise StateCodecError(f"{self.what} truncated: needs {n} bytes at {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> tuple[float | int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def text(self) -> str:
        (n,) = struct.unpack("<H", self.take(2))
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StateCodecError(f"{self.what} holds invalid UTF-8: {exc}") from exc

    def f64(self) -> float:
        (value,) = struct.unpack("<d", self.take(8))
        return float(value)

    def vector(self, dims: int) -> Vector:
        return np.frombuffer(self.take(8 * dims), dtype="<f8").astype(np.float64)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise StateCodecError(f"{self.what} has {len(self.data) - self.pos} trailing bytes")


def encode_forager(state: ForagerState) -> bytes:
    """The version-1 bytes of `state` (layout above)."""
    dims = state.weights.shape[0] if state.weights.ndim == 1 else -1
    w = _Writer()
    w.pack("<BB", _VERSION, _VARIANTS.index(state.variant))
    w.pack("<IIH", state.forager_id, state.draws, dims)
    w.vector(state.weights, dims)
    w.pack("<I", len(state.weblog))
    for url, value in state.weblog:
        w.text(url)
        w.pack("<d", value)
    path = state.path
    if len(path.visited) != len(path.rewards):
        raise StateCodecError("forager path has a reward per visited step")
    w.pack("<H", len(path.visited))
    for url, reward in zip(path.visited, path.rewards, strict=True):
        w.text(url)
        w.pack("<d", reward)
    w.pack("<B", path.current_x is not None)
    if path.current_x is not None:
        w.vector(path.current_x, dims)
    if path.frontier_x.shape != (len(path.frontier), dims):
        raise StateCodecError("forager frontier needs one x row per URL")
    w.pack("<H", len(path.frontier))
    for url, row in zip(path.frontier, path.frontier_x, strict=True):
        w.text(url)
        w.vector(row, dims)
    return bytes(w.out)


def decode_forager(data: bytes) -> ForagerState:
    """The state in `data`; StateCodecError (a ValueError) for anything malformed."""
    r = Reader(bytes(data), "forager state")
    version, variant, forager_id, draws, dims = _HEAD.unpack(r.take(_HEAD.size))
    if version != _VERSION:
        raise StateCodecError(f"forager state version {version} is not supported (want 1)")
    if variant >= len(_VARIANTS) or dims < 1:
        raise StateCodecError(f"forager state has variant {variant}, dimensions {dims}")
    weights = r.vector(dims)
    (n,) = r.unpack("<I")
    weblog = tuple((r.text(), r.f64()) for _ in range(int(n)))
    (v,) = r.unpack("<H")
    steps = [(r.text(), r.f64()) for _ in range(int(v))]
    (has_x,) = r.unpack("<B")
    current_x = r.vector(dims) if has_x else None
    (f,) = r.unpack("<H")
    frontier = [(r.text(), r.vector(dims)) for _ in range(int(f))]
    r.done()
    matrix = np.array([x for _, x in frontier], dtype=np.float64).reshape(len(frontier), dims)
    path = ForagerPath(
        tuple(u for u, _ in steps),
        tuple(x for _, x in steps),
        tuple(u for u, _ in frontier),
        matrix,
        current_x,
    )
    return ForagerState(forager_id, _VARIANTS[variant], weights, weblog, path, draws)
