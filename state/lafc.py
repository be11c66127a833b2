"""What the LAFC strategy operator keeps per URL key, and its compact, versioned binary form.

`LafcState` holds the page's learning automaton (`frontierflow.state.automaton`, Akbari
Torkestani 2012) with its similarity, cycle, stack priority, pending action and draw
counter; `encode_lafc`/`decode_lafc` turn it into bytes and back, checking the same
invariants both ways.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from frontierflow.state.automaton import Automaton
from frontierflow.state.storage.codec import StateCodecError

# Sum tolerance accepted by the codec's validation (the transitions keep within 1e-12).
_SUM_TOLERANCE = 1e-9


@dataclass(slots=True)
class LafcState:
    """Everything the LAFC strategy operator keeps for one URL key."""

    automaton: Automaton | None
    """The page's automaton; None until the page is fetched."""
    sim: float = -1.0
    """The page's own similarity to the topic (eq. 4); −1 while not fetched."""
    fetched_cycle: int = -1
    """Last crawl cycle the page was fetched in; −1: never."""
    push_ms: int = -1
    """Time the page was pushed on the stack S (the priority of its entries); −1: not pushed."""
    pending: int = -1
    """Index of the action sampled and sent out, whose echo is awaited; −1: none."""
    draws: int = 0
    """How many uniform draws this key has used (the counter of `uniform_draw`)."""


# --- codec -------------------------------------------------------------------------------
#
# Version 1 layout, all multi-byte numbers little-endian:
#   u8 version (1), u8 flags (bit 0: automaton present; other bits 0),
#   f64 sim, zigzag varints fetched_cycle, push_ms, pending, varint draws,
#   and with an automaton: zigzag varint cycle, f64 tau, varint r,
#   varint n + n bytes: the r actions in UTF-8 joined by "\n" (URLs hold no line feed),
#   r × f64 probability,
#   ceil(r/8) bytes of enabled mask (action j is bit j % 8 of byte j // 8; padding 0).
# One join, one split and one struct call per automaton: pages have up to ~1,000 links and
# the simulator decodes an automaton for nearly every answer.
# Varints are LEB128, minimal length. Decoding checks the same invariants encoding does.

_VERSION = 1
_HAS_AUTOMATON = 0x01
_HEAD = struct.Struct("<BBd")
_F64 = struct.Struct("<d")
_I64_MIN, _I64_MAX, _U64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def _put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_signed(out: bytearray, value: int, name: str) -> None:
    if not _I64_MIN <= value <= _I64_MAX:
        raise StateCodecError(f"LAFC {name} {value} does not fit a signed 64-bit integer")
    _put_varint(out, (value << 1) ^ (value >> 63))  # zigzag: small magnitudes, few bytes


def _validate(state: LafcState) -> None:
    """Refuse a state the transitions could not have produced (on encode and on decode)."""
    if not math.isfinite(state.sim):
        raise StateCodecError(f"LAFC similarity must be finite, got {state.sim}")
    if not 0 <= state.draws <= _U64_MAX:
        raise StateCodecError(f"LAFC draw counter {state.draws} is not an unsigned 64-bit int")
    aut = state.automaton
    r = 0 if aut is None else len(aut.actions)
    if not -1 <= state.pending < r:
        raise StateCodecError(f"LAFC pending action {state.pending} out of range for {r}")
    if aut is None:
        return
    if len(aut.probs) != r or len(aut.enabled) != r:
        raise StateCodecError(
            f"LAFC automaton has {r} actions, {len(aut.probs)} probabilities, "
            f"{len(aut.enabled)} enabled flags"
        )
    if len(set(aut.actions)) != r:
        raise StateCodecError("LAFC automaton actions must be distinct")
    if not math.isfinite(aut.tau):
        raise StateCodecError(f"LAFC threshold tau must be finite, got {aut.tau}")
    if not all(p >= 0.0 and math.isfinite(p) for p in aut.probs):
        raise StateCodecError("LAFC probabilities must be finite and >= 0")
    if r and abs(math.fsum(aut.probs) - 1.0) > _SUM_TOLERANCE:
        raise StateCodecError(f"LAFC probabilities sum to {math.fsum(aut.probs)}, not 1")


def encode_lafc(state: LafcState) -> bytes:
    """The version-1 bytes of `state` (layout above); StateCodecError if it is invalid."""
    _validate(state)
    aut = state.automaton
    out = bytearray(_HEAD.pack(_VERSION, 0 if aut is None else _HAS_AUTOMATON, state.sim))
    _put_signed(out, state.fetched_cycle, "fetched cycle")
    _put_signed(out, state.push_ms, "push time")
    _put_signed(out, state.pending, "pending action")
    _put_varint(out, state.draws)
    if aut is None:
        return bytes(out)
    _put_signed(out, aut.cycle, "cycle")
    out += _F64.pack(aut.tau)
    r = len(aut.actions)
    _put_varint(out, r)
    if not all(isinstance(action, str) for action in aut.actions):
        raise StateCodecError("LAFC actions must be strings")
    joined = "\n".join(aut.actions)
    if joined.count("\n") != max(0, r - 1) or not all(aut.actions):
        raise StateCodecError("LAFC actions must be non-empty and hold no line feed")
    try:
        raw = joined.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StateCodecError(f"LAFC actions are not valid Unicode: {exc}") from exc
    _put_varint(out, len(raw))
    out += raw
    out += struct.pack(f"<{r}d", *aut.probs)
    out += np.packbits(np.asarray(aut.enabled, dtype=bool), bitorder="little").tobytes()
    return bytes(out)


class _Reader:
    """A cursor over encoded bytes that raises StateCodecError instead of running past."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise StateCodecError(f"LAFC state truncated: needs {n} bytes at offset {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def varint(self) -> int:
        value = shift = 0
        for _ in range(10):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if byte == 0 and shift:
                    raise StateCodecError("LAFC state has a non-minimal varint")
                if value > _U64_MAX:
                    raise StateCodecError("LAFC state has a varint over 64 bits")
                return value
            shift += 7
        raise StateCodecError("LAFC state has a varint longer than 10 bytes")

    def signed(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)


def take_lines(reader: _Reader, count: int, what: str) -> tuple[str, ...]:
    """`count` non-empty strings stored as a varint byte length and their UTF-8 joined by line
    feeds; StateCodecError naming `what` when they are not."""
    raw = reader.take(reader.varint())
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateCodecError(f"{what} are not valid UTF-8: {exc}") from exc
    lines = tuple(text.split("\n")) if count else ()
    if len(lines) != count or not all(lines):
        raise StateCodecError(f"{what}: the state holds {len(lines)}, not {count}")
    return lines


def decode_lafc(data: bytes) -> LafcState:
    """The state in `data`; StateCodecError (a ValueError) for anything malformed."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise StateCodecError(f"LAFC state must be bytes, got {type(data).__name__}")
    reader = _Reader(bytes(data))
    version, flags, sim = _HEAD.unpack(reader.take(_HEAD.size))
    if version != _VERSION:
        raise StateCodecError(f"LAFC state version {version} is not supported (want 1)")
    if flags & ~_HAS_AUTOMATON:
        raise StateCodecError(f"LAFC state has unknown flags {flags:#04x}")
    fetched_cycle, push_ms, pending = reader.signed(), reader.signed(), reader.signed()
    draws = reader.varint()
    automaton = _decode_automaton(reader) if flags & _HAS_AUTOMATON else None
    if reader.pos != len(reader.data):
        raise StateCodecError(f"LAFC state has {len(reader.data) - reader.pos} trailing bytes")
    state = LafcState(automaton, sim, fetched_cycle, push_ms, pending, draws)
    _validate(state)
    return state


def _decode_automaton(reader: _Reader) -> Automaton:
    cycle = reader.signed()
    (tau,) = _F64.unpack(reader.take(_F64.size))
    r = reader.varint()
    # Each action takes at least 1 text byte and 8 probability bytes: refuse a count the
    # remaining bytes cannot hold before allocating anything for it.
    if r * 9 > len(reader.data) - reader.pos:
        raise StateCodecError(f"LAFC state truncated: {r} actions cannot fit")
    actions = take_lines(reader, r, "LAFC actions")
    probs = list(struct.unpack(f"<{r}d", reader.take(8 * r)))
    mask = reader.take((r + 7) // 8)
    if r % 8 and mask[-1] >> (r % 8):
        raise StateCodecError("LAFC state has bits set past the end of the enabled mask")
    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")
    enabled = bits[:r].astype(bool).tolist()
    return Automaton(actions, probs, enabled, tau, cycle)
