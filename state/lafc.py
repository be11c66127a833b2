"""LAFC's per-page learning automaton (seed 000, Akbari Torkestani 2012) as state + transitions.

Each fetched page d_i owns a variable action-set learning automaton whose actions are the
page's outlinks; it samples one enabled link from its probabilities scaled to the enabled
subset (eq. 3), learns from the similarity of the page the link led to (eqs. 1, 2, 6), and
adapts to changed link sets (eqs. 7, 8). Every transition here is pure: it returns a new
`Automaton` and never mutates its argument. `LafcState` is what the strategy operator keeps
per URL key; `encode_lafc`/`decode_lafc` give it a compact, versioned binary form.

Choices where the paper is silent or ambiguous (each is repeated where it is implemented):
- eq. 2 with r = 1 divides by zero; with one enabled action its scaled probability is 1
  whatever happens, so an update over a one-action subset changes nothing.
- τ_i survives a new crawl cycle (`start_cycle`); it restarts from 0 when a refetch removes
  links (`relink`), because eq. 6 takes the maximum over the page's *current* links.
- The penalty is eq. 2 as printed (b/(r−1) to each other action), with b from the scheme.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from frontierflow.state.codec import StateCodecError

# Drift of the probability sum larger than this is corrected by renormalising; smaller
# drift is left alone so that actions outside an update keep their exact values.
_DRIFT = 1e-12
# Sum tolerance accepted by the codec's validation (the transitions keep within _DRIFT).
_SUM_TOLERANCE = 1e-9


class Scheme(StrEnum):
    """The linear reinforcement schemes of seed 000 §2 (after eq. 2); a `str` and an `Enum`."""

    LRI = "L_R-I"
    """Linear reward-inaction, b = 0: the paper's scheme (§3.2) and the one Theorem 1 covers."""
    LRP = "L_R-P"
    """Linear reward-penalty, b = a."""
    LREP = "L_R-eP"
    """Linear reward-ε-penalty, b = ε·a with ε small."""


@dataclass(frozen=True, slots=True)
class LearningParams:
    """Learning rate and scheme of every automaton, validated once at start-up.

    Defaults are the paper's calibration (seed 000 Table 3: a = 0.09 with L_R-I).
    """

    a: float = 0.09
    """Reward rate of eq. 1; Theorem 1 needs it small (see the tests for a = 0.5)."""
    scheme: Scheme = Scheme.LRI
    epsilon: float = 0.1
    """Ratio b/a for L_R-εP."""
    tolerance: float = 1e-9
    """A similarity within this of τ_i counts as reaching it (DESIGN §5: many pages tie)."""

    def __post_init__(self) -> None:
        try:
            scheme = Scheme(self.scheme)
        except ValueError as exc:
            names = ", ".join(s.value for s in Scheme)
            raise ValueError(f"LAFC scheme must be one of {names}, got {self.scheme!r}") from exc
        object.__setattr__(self, "scheme", scheme)
        if not 0.0 < self.a < 1.0:
            raise ValueError(f"LAFC learning rate a must be in (0, 1), got {self.a}")
        if not 0.0 < self.epsilon <= 1.0:
            raise ValueError(f"LAFC epsilon must be in (0, 1], got {self.epsilon}")
        if not (self.tolerance >= 0.0 and math.isfinite(self.tolerance)):
            raise ValueError(f"LAFC tolerance must be finite and >= 0, got {self.tolerance}")

    @property
    def b(self) -> float:
        """Penalty rate of eq. 2 for the scheme: 0 (L_R-I), a (L_R-P) or ε·a (L_R-εP)."""
        if self.scheme is Scheme.LRP:
            return self.a
        if self.scheme is Scheme.LREP:
            return self.epsilon * self.a
        return 0.0


@dataclass(slots=True)
class Automaton:
    """The learning automaton A_i of one page d_i (seed 000 §3.1).

    `probs` is the full vector p_i over all actions, disabled ones included (eq. 3 scales
    it to the enabled subset only when choosing and learning).
    """

    actions: tuple[str, ...]
    """The page's distinct outlinks, in page order (the action set α_i)."""
    probs: list[float]
    """Action probabilities p_i over all actions; they sum to 1 (empty if no actions)."""
    enabled: list[bool]
    """Actions still available in this cycle: visited targets are removed (§3.2)."""
    tau: float = 0.0
    """Dynamic similarity threshold τ_i (eq. 6): the best similarity seen so far; starts 0."""
    cycle: int = 0
    """The crawl cycle the enabled mask belongs to."""


def _distinct(actions: Sequence[str]) -> tuple[str, ...]:
    """The actions in order with repeats dropped: an action set has each link once."""
    return tuple(dict.fromkeys(actions))


def _renormalised(probs: list[float]) -> list[float]:
    """`probs` rescaled to sum to 1 if rounding has moved their sum by more than _DRIFT.

    Each update rounds; over a long crawl the errors would add up. Correcting only past
    _DRIFT keeps untouched actions bit-for-bit unchanged in the common case.
    """
    total = math.fsum(probs)
    if total > 0.0 and abs(total - 1.0) > _DRIFT:
        return [p / total for p in probs]
    return probs


def _check_index(aut: Automaton, index: int) -> None:
    if not 0 <= index < len(aut.actions):
        raise ValueError(f"action index {index} out of range for {len(aut.actions)} actions")


def new_automaton(actions: Sequence[str], cycle: int) -> Automaton:
    """The automaton of a page fetched for the first time (seed 000 §3.1).

    Actions are the distinct outlinks (repeats dropped, first occurrence kept), each with
    probability 1/|u(i)| because nothing is known yet about where they lead; all enabled.
    """
    acts = _distinct(actions)
    r = len(acts)
    return Automaton(acts, [1.0 / r] * r if r else [], [True] * r, 0.0, cycle)


def relink(aut: Automaton, actions: Sequence[str]) -> Automaton:
    """The automaton after a refetch found the link set `actions` (seed 000 §3.3).

    Removed links first, with eq. 8 for each: p_k ← (1 + p_j/(1 − p_j))·p_k spreads the
    removed p_j over the rest in proportion. Applied one removal after another this is
    p_k ← p_k / (mass of the kept actions), which is what we compute. Then added links,
    with eq. 7 for each: the new one gets 1/|u(i)| (|u(i)| counting it) and the others are
    scaled by (|u(i)| − 1)/|u(i)|. Applied one addition after another to m kept actions
    this gives every added link 1/n and every kept one p_k·m/n, n = the final link count:
    each new link gets exactly 1/|u(i)| of the page as it now is, whatever the order.

    Kept actions keep their learned probability (as renormalised) and their enabled flag;
    added ones are enabled. The order of the result is that of `actions`.

    Where eq. 8 is undefined (the removed links held all the probability, 1 − p_j = 0) the
    kept actions restart uniform. τ_i: eq. 6 defines it as the maximum over the page's
    current links; we keep no per-link similarities to recompute it, so when links are
    removed τ_i restarts from 0, as for a new page (otherwise a removed best link would
    leave τ_i unreachable and, under L_R-I, stop all learning of this page). When links
    are only added τ_i is kept. A caller holding an action index (a pending choice) must
    look it up again by name: indices change.
    """
    acts = _distinct(actions)
    old = {action: i for i, action in enumerate(aut.actions)}
    kept = [old[action] for action in acts if action in old]
    n, m = len(acts), len(kept)
    removed = len(aut.actions) - m
    after_removal = _after_removals(aut.probs, kept) if removed else aut.probs
    probs: list[float] = []
    enabled: list[bool] = []
    for action in acts:
        i = old.get(action)
        if i is None:
            probs.append(1.0 / n)  # eq. 7, the new action
            enabled.append(True)
        else:
            probs.append(after_removal[i] * m / n)  # eq. 7, a kept action
            enabled.append(aut.enabled[i])
    tau = 0.0 if removed else aut.tau
    return Automaton(acts, _renormalised(probs), enabled, tau, aut.cycle)


def _after_removals(probs: list[float], kept: list[int]) -> list[float]:
    """Eq. 8 for every removed action at once: the kept p_k divided by the kept mass.

    Indexed like `probs`; removed positions hold 0. Where eq. 8 is undefined (the removed
    actions held all the probability, 1 − p_j = 0) the kept actions restart uniform.
    """
    kept_mass = math.fsum(probs[i] for i in kept)
    out = [0.0] * len(probs)
    for i in kept:
        out[i] = probs[i] / kept_mass if kept_mass > 0.0 else 1.0 / len(kept)
    return out


def start_cycle(aut: Automaton, cycle: int) -> Automaton:
    """The automaton at the start of crawl cycle `cycle`: every action enabled again.

    Seed 000 §3.2: "at the end of the crawling process, all learning automata must enable
    the disabled actions again for the further crawling" — only the actions are restored.
    τ_i is kept: eq. 6 defines it as the best similarity seen "so far" among the page's
    links and the paper sets it to 0 only once, when the automaton is created; the
    learning is meant to carry over into the next crawl (§3.2, last paragraph). Calls
    for a cycle not after the automaton's own change nothing (re-injections are lazy and
    may repeat).
    """
    if cycle <= aut.cycle:
        return Automaton(aut.actions, list(aut.probs), list(aut.enabled), aut.tau, aut.cycle)
    return Automaton(aut.actions, list(aut.probs), [True] * len(aut.actions), aut.tau, cycle)


def choose(aut: Automaton, u: float) -> int | None:
    """The index of the action drawn with uniform `u` ∈ [0, 1), or None if none is enabled.

    Inverse CDF over the scaled probabilities p̂ = p/K of the enabled subset (eq. 3),
    walked in action order. Rounding can leave the running sum just below u·K at the
    end; the last enabled action with p > 0 is then taken, so a disabled action (or one
    of probability 0) is never returned. If every enabled action has p = 0 (underflow
    after very long learning elsewhere) the draw is uniform over the enabled ones.
    """
    if not 0.0 <= u < 1.0:
        raise ValueError(f"a uniform draw must be in [0, 1), got {u}")
    subset = [i for i, on in enumerate(aut.enabled) if on]
    if not subset:
        return None
    total = math.fsum(aut.probs[i] for i in subset)
    if not total > 0.0:
        return subset[min(int(u * len(subset)), len(subset) - 1)]
    target = u * total
    running = 0.0
    last_positive = subset[-1]
    for i in subset:
        p = aut.probs[i]
        if p <= 0.0:
            continue
        running += p
        last_positive = i
        if target < running:
            return i
    return last_positive


def update(aut: Automaton, index: int, rewarded: bool, params: LearningParams) -> Automaton:
    """One learning step of the variable action-set automaton (seed 000 §2.1).

    1. Scale to the enabled subset: p̂_j = p_j / K, K = Σ_{j enabled} p_j (eq. 3).
    2. Reward (eq. 1): p̂_i ← p̂_i + a(1 − p̂_i), p̂_j ← (1 − a)p̂_j for j ≠ i;
       or penalty (eq. 2): p̂_i ← (1 − b)p̂_i, p̂_j ← b/(r − 1) + (1 − b)p̂_j,
       with r = the number of actions in the subset.
    3. Rescale: p_j = p̂_j · K. Actions outside the subset are unchanged.

    The subset is the enabled actions plus `index` itself: it was enabled when it was
    chosen (eq. 3's A(k) is the subset at choosing time), and the operator may have
    disabled it since, e.g. because its page was reached by another path. The action is
    not disabled here (`reinforce` does that).

    Deviations: with r = 1, eq. 2 divides by zero; a one-action subset has p̂ = 1 whatever
    is learned, so nothing changes. L_R-I penalties (b = 0) return the probabilities
    untouched rather than p/K·K, which could differ in the last bit.
    """
    _check_index(aut, index)
    subset = [i for i, on in enumerate(aut.enabled) if on or i == index]
    r = len(subset)
    total = math.fsum(aut.probs[i] for i in subset)
    b = params.b
    unchanged = r == 1 or not total > 0.0 or (not rewarded and b == 0.0)
    probs = list(aut.probs)
    if not unchanged:
        a = params.a
        for j in subset:
            scaled = aut.probs[j] / total
            if rewarded:
                scaled = scaled + a * (1.0 - scaled) if j == index else (1.0 - a) * scaled
            else:
                scaled = (1.0 - b) * scaled if j == index else b / (r - 1) + (1.0 - b) * scaled
            probs[j] = scaled * total
        probs = _renormalised(probs)
    return Automaton(aut.actions, probs, list(aut.enabled), aut.tau, aut.cycle)


def reinforce(
    aut: Automaton, index: int, sim: float, params: LearningParams
) -> tuple[Automaton, bool]:
    """The paper's step after action `index` led to a page of similarity `sim` (§3.2).

    Rewarded (eq. 1) if sim ≥ τ_i − tolerance, and then τ_i = max(τ_i, sim) (eq. 6: the
    best similarity seen so far; within the tolerance τ_i never moves down); penalised
    (eq. 2) otherwise. The action is then disabled for the rest of the cycle, as its page
    has been visited. Returns the new automaton and whether the action was rewarded.
    """
    if not math.isfinite(sim):
        raise ValueError(f"similarity must be a finite number, got {sim}")
    rewarded = sim >= aut.tau - params.tolerance
    learned = update(aut, index, rewarded, params)
    learned.enabled[index] = False  # `learned` is a fresh object, never the argument
    if rewarded:
        learned.tau = max(aut.tau, sim)
    return learned, rewarded


def disable(aut: Automaton, index: int) -> Automaton:
    """The automaton with action `index` removed for this cycle, without learning.

    Used when the action's page was already visited by another path (§3.2: visited
    documents are removed from the action set to avoid revisiting them).
    """
    _check_index(aut, index)
    enabled = list(aut.enabled)
    enabled[index] = False
    return Automaton(aut.actions, list(aut.probs), enabled, aut.tau, aut.cycle)


_SEED = struct.Struct("<q")
_COUNTER = struct.Struct("<Q")


def uniform_draw(seed: int, key: str, counter: int) -> float:
    """A repeatable uniform number in [0, 1) for draw number `counter` of URL `key`.

    blake2b keyed with the seed (as `RandomOrder` in the baselines) over the counter and
    the key, so a replay draws exactly the same numbers whatever the processing order.
    The top 53 bits of the digest are used, so the result is exact in a float and < 1.
    """
    try:
        secret = _SEED.pack(seed)
        message = _COUNTER.pack(counter) + key.encode("utf-8", "surrogatepass")
    except struct.error as exc:
        raise ValueError(
            f"seed must be a signed and counter an unsigned 64-bit int: {seed}, {counter}"
        ) from exc
    digest = hashlib.blake2b(message, digest_size=8, key=secret).digest()
    return (int.from_bytes(digest, "little") >> 11) / 2.0**53


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
    raw = reader.take(reader.varint())
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateCodecError(f"LAFC actions are not valid UTF-8: {exc}") from exc
    actions = tuple(text.split("\n")) if r else ()
    if len(actions) != r or not all(actions):
        raise StateCodecError(f"LAFC state holds {len(actions)} actions, not {r}")
    probs = list(struct.unpack(f"<{r}d", reader.take(8 * r)))
    mask = reader.take((r + 7) // 8)
    if r % 8 and mask[-1] >> (r % 8):
        raise StateCodecError("LAFC state has bits set past the end of the enabled mask")
    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")
    enabled = bits[:r].astype(bool).tolist()
    return Automaton(actions, probs, enabled, tau, cycle)
