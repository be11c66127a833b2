"""LAFC's per-page learning automaton (Akbari Torkestani 2012): state + transitions.

Each fetched page d_i owns a variable action-set learning automaton whose actions are the
page's outlinks; it samples one enabled link from its probabilities scaled to the enabled
subset (eq. 3), learns from the similarity of the page the link led to (eqs. 1, 2, 6), and
adapts to changed link sets (eqs. 7, 8). Every transition here is pure: it returns a new
`Automaton` and never mutates its argument.

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

# Drift of the probability sum larger than this is corrected by renormalising; smaller
# drift is left alone so that actions outside an update keep their exact values.
_DRIFT = 1e-12


class Scheme(StrEnum):
    """The linear reinforcement schemes of Akbari Torkestani 2012, §2 (after eq. 2); a `str`
    and an `Enum`."""

    LRI = "L_R-I"
    """Linear reward-inaction, b = 0: the paper's scheme (§3.2) and the one Theorem 1 covers."""
    LRP = "L_R-P"
    """Linear reward-penalty, b = a."""
    LREP = "L_R-eP"
    """Linear reward-ε-penalty, b = ε·a with ε small."""


@dataclass(frozen=True, slots=True)
class LearningParams:
    """Learning rate and scheme of every automaton, validated once at start-up.

    Defaults are the paper's calibration (Table 3: a = 0.09 with L_R-I).
    """

    a: float = 0.09
    """Reward rate of eq. 1; Theorem 1 needs it small (see the tests for a = 0.5)."""
    scheme: Scheme = Scheme.LRI
    epsilon: float = 0.1
    """Ratio b/a for L_R-εP."""
    tolerance: float = 1e-9
    """A similarity within this of τ_i counts as reaching it (many pages tie)."""

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
    """The learning automaton A_i of one page d_i (§3.1).

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
    """The automaton of a page fetched for the first time (§3.1).

    Actions are the distinct outlinks (repeats dropped, first occurrence kept), each with
    probability 1/|u(i)| because nothing is known yet about where they lead; all enabled.
    """
    acts = _distinct(actions)
    r = len(acts)
    return Automaton(acts, [1.0 / r] * r if r else [], [True] * r, 0.0, cycle)


def relink(aut: Automaton, actions: Sequence[str]) -> Automaton:
    """The automaton after a refetch found the link set `actions` (§3.3).

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

    Akbari Torkestani 2012, §3.2: "at the end of the crawling process, all learning automata
    must enable the disabled actions again for the further crawling" — only the actions are
    restored. τ_i is kept: eq. 6 defines it as the best similarity seen "so far" among the
    page's links and the paper sets it to 0 only once, when the automaton is created; the
    learning is meant to carry over into the next crawl (§3.2, last paragraph). Calls for a
    cycle not after the automaton's own change nothing (re-injections are lazy and may
    repeat).
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
    """One learning step of the variable action-set automaton (§2.1).

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
