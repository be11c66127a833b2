"""The bytes of LAFC+'s per-page state (`frontierflow.state.lafc_plus.LafcPlusState`): a
compact versioned encoding, checked on the way in and out, and fast for pages with hundreds of
outlinks (every answer rewrites its page's state)."""

from __future__ import annotations

import math
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from frontierflow.state.lafc import _put_signed, _put_varint, _Reader, take_lines
from frontierflow.state.lafc_plus import MAX_ANSWERS, SEEN, UNKNOWN, LafcPlusState
from frontierflow.state.storage.codec import StateCodecError

# --- codec -------------------------------------------------------------------------------
# Version 1, little-endian: u8 version, f64 sim, f64 future, varint answers, zigzag varints
# fetched_cycle and pending, varint r, varint n + n bytes: the r actions in UTF-8 joined by
# "\n", r × f64 estimate (−1 unknown, −2 seen: older states hold no −2 and read unchanged),
# ceil(r/8) bytes of enabled mask (action j is bit j % 8 of byte j // 8), varint p + varint
# m + m bytes: the p path pages joined by "\n". The varints and the reader are those of the
# LAFC state (state/lafc.py).

_VERSION = 1
_HEAD = struct.Struct("<Bdd")


def _validate(state: LafcPlusState) -> None:
    """Everything but the actions' and path pages' types, which `_put_urls` checks on the
    way out and the decoder makes."""
    r = len(state.actions)
    if len(state.values) != r or len(state.enabled) != r:
        raise StateCodecError(
            f"LAFC+ state has {r} actions, {len(state.values)} estimates, "
            f"{len(state.enabled)} enabled flags"
        )
    if not (math.isfinite(state.sim) and (state.sim >= 0.0 or state.sim == -1.0)):
        raise StateCodecError(f"LAFC+ worth must be >= 0 or -1, got {state.sim}")
    if not math.isfinite(state.future):
        raise StateCodecError(f"LAFC+ harvest must be finite, got {state.future}")
    if not 0 <= state.answers <= MAX_ANSWERS:
        raise StateCodecError(f"LAFC+ answer count {state.answers} out of range")
    if not -1 <= state.pending < r:
        raise StateCodecError(f"LAFC+ pending action {state.pending} out of range for {r}")
    # at C speed (states hold hundreds of estimates and this runs at every write): a finite sum
    # means no NaN or infinity (a sum too large to be finite is checked value by value); then,
    # in sorted order, the estimates below 0 must be a run of SEEN followed by a run of UNKNOWN
    values = state.values
    finite = math.isfinite(sum(values)) or all(map(math.isfinite, values))
    if not finite or not _only_marks_below_zero(sorted(values)):
        raise StateCodecError(
            "LAFC+ estimates must be finite and >= 0, or -1 (unknown), or -2 (seen)"
        )


def _only_marks_below_zero(ordered: list[float]) -> bool:
    """Whether every value below 0 of the sorted, finite `ordered` is SEEN or UNKNOWN: none
    before the SEEN run, none between it and the UNKNOWN run, none between that and 0."""
    seen_end = bisect_right(ordered, SEEN)
    unknown_end = bisect_right(ordered, UNKNOWN)
    return (
        bisect_left(ordered, SEEN) == 0
        and bisect_left(ordered, UNKNOWN) == seen_end
        and bisect_left(ordered, 0.0) == unknown_end
    )


def _encoded_actions(state: LafcPlusState) -> bytes:
    """The actions' segment of the encoding, checked (distinct, non-empty strings without
    line feeds) and kept on the state the first time it is asked for: a memo of a value
    derived from `actions`, which no rule changes in place."""
    encoded = state.encoded_actions
    if encoded is None:
        if len(set(state.actions)) != len(state.actions):
            raise StateCodecError("LAFC+ actions must be distinct")
        out = bytearray()
        _put_urls(out, state.actions, "actions")
        state.encoded_actions = encoded = bytes(out)
    return encoded


def _encoded_path(state: LafcPlusState) -> bytes:
    """The path's segment of the encoding, checked and kept on the state like the actions'
    (`_encoded_actions`): a page's path is the same at every write between two fetches."""
    encoded = state.encoded_path
    if encoded is None:
        out = bytearray()
        _put_urls(out, state.path, "path pages")
        state.encoded_path = encoded = bytes(out)
    return encoded


_BITS = bytes(0x30 + b if b < 2 else 0x78 for b in range(256))
"""bytes.translate table: flag 0 → "0", 1 → "1", anything else → "x" (not a binary digit)."""


def _mask(enabled: Sequence[bool], r: int) -> bytes:
    """The enabled mask, ceil(r/8) bytes, action j as bit j % 8 of byte j // 8: one integer
    read from the flags as binary digits, all at C speed (states have hundreds of actions)."""
    if not r:
        return b""
    try:
        bits = int(bytes(enabled[::-1]).translate(_BITS), 2)
    except (ValueError, TypeError) as exc:
        raise StateCodecError("LAFC+ enabled flags must be booleans") from exc
    return bits.to_bytes((r + 7) // 8, "little")


def _flags(mask: bytes, r: int) -> list[bool]:
    """The inverse of `_mask`; StateCodecError when a bit past the r-th is set."""
    bits = int.from_bytes(mask, "little")
    if bits >> r:
        raise StateCodecError("LAFC+ state has bits set past the end of the enabled mask")
    if not r:
        return []
    return list(map("1".__eq__, format(bits, f"0{r}b")[::-1]))


def _put_urls(out: bytearray, urls: tuple[str, ...], what: str) -> None:
    """varint count, varint byte length, the URLs in UTF-8 joined by line feeds."""
    _put_varint(out, len(urls))
    try:
        joined = "\n".join(urls)
        raw = joined.encode("utf-8")
    except (UnicodeEncodeError, TypeError) as exc:
        raise StateCodecError(f"LAFC+ {what} are not valid Unicode strings: {exc}") from exc
    if joined.count("\n") != max(0, len(urls) - 1) or not all(urls):
        raise StateCodecError(f"LAFC+ {what} must be non-empty and hold no line feed")
    _put_varint(out, len(raw))
    out += raw


def encode_lafc_plus(state: LafcPlusState) -> bytes:
    """The version-1 bytes of `state` (layout above); StateCodecError if it is invalid. Kept
    on the state (`encoded`): a state is never changed once made."""
    if state.encoded is not None:
        return state.encoded
    _validate(state)
    head = bytearray(_HEAD.pack(_VERSION, state.sim, state.future))
    _put_varint(head, state.answers)
    _put_signed(head, state.fetched_cycle, "fetched cycle")
    _put_signed(head, state.pending, "pending action")
    r = len(state.actions)
    actions = _encoded_actions(state)
    values = struct.pack(f"<{r}d", *state.values)
    mask = _mask(state.enabled, r)
    # one copy of the actions' segment, the bulk of the bytes (not two through a bytearray)
    state.encoded = data = b"".join((head, actions, values, mask, _encoded_path(state)))
    return data


def decode_lafc_plus(data: bytes) -> LafcPlusState:
    """The state in `data`; StateCodecError (a ValueError) for anything malformed."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise StateCodecError(f"LAFC+ state must be bytes, got {type(data).__name__}")
    reader = _Reader(bytes(data))
    version, sim, future = _HEAD.unpack(reader.take(_HEAD.size))
    if version != _VERSION:
        raise StateCodecError(f"LAFC+ state version {version} is not supported (want 1)")
    answers = reader.varint()
    fetched_cycle, pending = reader.signed(), reader.signed()
    start = reader.pos
    r = reader.varint()
    if r * 9 > len(reader.data) - reader.pos:
        raise StateCodecError(f"LAFC+ state truncated: {r} actions cannot fit")
    actions = take_lines(reader, r, "LAFC+ actions")
    encoded = reader.data[start : reader.pos]
    values = list(struct.unpack(f"<{r}d", reader.take(8 * r)))
    enabled = _flags(reader.take((r + 7) // 8), r)
    start = reader.pos
    p = reader.varint()
    if p > len(reader.data) - reader.pos:
        raise StateCodecError(f"LAFC+ state truncated: {p} path pages cannot fit")
    path = take_lines(reader, p, "LAFC+ path pages")
    encoded_path = reader.data[start : reader.pos]
    if reader.pos != len(reader.data):
        raise StateCodecError(f"LAFC+ state has {len(reader.data) - reader.pos} trailing bytes")
    if len(set(actions)) != r:
        raise StateCodecError("LAFC+ actions must be distinct")
    state = LafcPlusState(
        actions,
        values,
        enabled,
        sim,
        future,
        answers,
        fetched_cycle,
        pending,
        path,
        encoded,
        encoded_path,
    )
    _validate(state)
    return state
