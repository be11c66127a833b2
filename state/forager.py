"""A forager of Palotai, Farkas & Lőrincz 2005 (long version) as keyed state, and its encoding.

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

from frontierflow.state.storage.codec import StateCodecError

Vector = npt.NDArray[np.float64]
Weblog = tuple[tuple[str, float], ...]
"""(url, weblog value) pairs in descending order of value; the first ones are the start list."""

HOUR_MS = 3_600_000


class Variant(StrEnum):
    """The forager kinds of the paper's §4 (and the combination of its web
    experiment)."""

    WL = "wl"
    """Weblog update only; a fixed random weight vector (the paper: "WL foragers")."""
    RL = "rl"
    """TD(0) URL-ordering update only; a fixed weblog (the paper: "RL foragers")."""
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
# Version 2, little-endian, in blocks so that a fleet of foragers with long frontiers
# decodes in a few array copies: u8 version, u8 variant (0 wl, 1 rl, 2 wlrl), u32 forager
# id, u32 draws, u16 dimensions d; u32 weblog length n, u16 visited count v, u16 frontier
# size f, u8 has-current-x; u32 byte length of the n + v + f URLs in that order, UTF-8,
# joined by newlines (a URL never holds one: input validation refuses it); then f64
# blocks: d weights, n weblog values, v rewards, d current x if set, f×d frontier x.
# (Version 1, a URL at a time, was only ever held in memory by the simulator.)

_VERSION = 2
_VARIANTS = (Variant.WL, Variant.RL, Variant.WLRL)
_HEAD = struct.Struct("<BBIIHIHHB")
_SEP = "\n"


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
    """The version-2 bytes of `state` (layout above)."""
    weights = state.weights
    if weights.ndim != 1 or not 1 <= weights.shape[0] <= 0xFFFF:
        raise StateCodecError(f"forager weights have shape {weights.shape}")
    dims = weights.shape[0]
    path = state.path
    if len(path.visited) != len(path.rewards):
        raise StateCodecError("forager path has a reward per visited step")
    if path.frontier_x.shape != (len(path.frontier), dims):
        raise StateCodecError("forager frontier needs one x row per URL")
    if path.current_x is not None and path.current_x.shape != (dims,):
        raise StateCodecError(f"forager x has shape {path.current_x.shape}, not ({dims},)")
    urls = [u for u, _ in state.weblog] + list(path.visited) + list(path.frontier)
    if any(_SEP in u for u in urls):
        raise StateCodecError("a forager URL holds a newline")
    try:
        text = _SEP.join(urls).encode("utf-8")
        head = _HEAD.pack(
            _VERSION,
            _VARIANTS.index(state.variant),
            state.forager_id,
            state.draws,
            dims,
            len(state.weblog),
            len(path.visited),
            len(path.frontier),
            path.current_x is not None,
        )
    except (struct.error, UnicodeEncodeError) as exc:
        raise StateCodecError(f"forager state cannot be encoded: {exc}") from exc
    blocks = [weights, np.array([v for _, v in state.weblog]), np.array(path.rewards)]
    if path.current_x is not None:
        blocks.append(path.current_x)
    blocks.append(path.frontier_x.reshape(-1))
    numbers = np.concatenate([np.asarray(b, dtype="<f8").reshape(-1) for b in blocks])
    return b"".join((head, struct.pack("<I", len(text)), text, numbers.tobytes()))


def decode_forager(data: bytes) -> ForagerState:
    """The state in `data`; StateCodecError (a ValueError) for anything malformed."""
    r = Reader(bytes(data), "forager state")
    version, variant, forager_id, draws, dims, n, v, f, has_x = _HEAD.unpack(r.take(_HEAD.size))
    if version != _VERSION:
        raise StateCodecError(f"forager state version {version} is not supported (want 2)")
    if variant >= len(_VARIANTS) or dims < 1:
        raise StateCodecError(f"forager state has variant {variant}, dimensions {dims}")
    (size,) = r.unpack("<I")
    try:
        text = r.take(int(size)).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateCodecError(f"forager state holds invalid UTF-8: {exc}") from exc
    urls = text.split(_SEP) if n + v + f else []
    if len(urls) != n + v + f:
        raise StateCodecError(f"forager state names {len(urls)} URLs, not {n + v + f}")
    count = dims + n + v + (dims if has_x else 0) + f * dims
    numbers = np.frombuffer(r.take(8 * count), dtype="<f8").astype(np.float64)
    r.done()
    weights, at = numbers[:dims], dims
    values, at = numbers[at : at + n].tolist(), at + n
    rewards, at = numbers[at : at + v].tolist(), at + v
    current_x = None
    if has_x:
        current_x, at = numbers[at : at + dims], at + dims
    matrix = numbers[at:].reshape(f, dims)
    path = ForagerPath(
        tuple(urls[n : n + v]), tuple(rewards), tuple(urls[n + v :]), matrix, current_x
    )
    weblog = tuple(zip(urls[:n], values, strict=True))
    return ForagerState(forager_id, _VARIANTS[variant], weights, weblog, path, draws)
