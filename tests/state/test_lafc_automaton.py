"""LAFC's learning automaton (Akbari Torkestani 2012): hand-worked eqs. 1–3, 7, 8, Theorem
1, the codec."""

from __future__ import annotations

import contextlib
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontierflow.state.automaton import (
    Automaton,
    LearningParams,
    Scheme,
    choose,
    disable,
    new_automaton,
    reinforce,
    relink,
    start_cycle,
    uniform_draw,
    update,
)
from frontierflow.state.lafc import LafcState, decode_lafc, encode_lafc
from frontierflow.state.storage.codec import StateCodecError

LRI = LearningParams(a=0.09, scheme=Scheme.LRI)
LRP = LearningParams(a=0.09, scheme=Scheme.LRP)


def aut_of(probs: list[float], enabled: list[bool] | None = None, tau: float = 0.0) -> Automaton:
    actions = tuple(f"http://x.test/{i}" for i in range(len(probs)))
    return Automaton(actions, list(probs), enabled or [True] * len(probs), tau, 0)


# --- parameters ------------------------------------------------------------------------


def test_scheme_penalty_rates() -> None:
    assert LearningParams(a=0.09).b == 0.0  # L_R-I: b = 0
    assert LearningParams(a=0.09, scheme=Scheme.LRP).b == 0.09  # L_R-P: b = a
    # L_R-εP: b = ε·a = 0.1 · 0.09 = 0.009
    assert LearningParams(a=0.09, scheme=Scheme.LREP).b == pytest.approx(0.009)
    assert LearningParams(scheme="L_R-P").scheme is Scheme.LRP  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"a": 0.0},
        {"a": 1.0},
        {"a": -0.1},
        {"a": math.nan},
        {"epsilon": 0.0},
        {"epsilon": 1.5},
        {"tolerance": -1e-9},
        {"tolerance": math.inf},
        {"scheme": "L_R-X"},
    ],
)
def test_invalid_params_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LearningParams(**kwargs)  # type: ignore[arg-type]


# --- eqs. 1–3 by hand ------------------------------------------------------------------


def test_new_automaton_is_uniform_and_distinct() -> None:
    aut = new_automaton(["a", "b", "a", "c"], cycle=2)
    assert aut.actions == ("a", "b", "c")  # repeats dropped, page order kept
    assert aut.probs == [1 / 3] * 3  # 1/|u(i)|
    assert aut.enabled == [True] * 3
    assert (aut.tau, aut.cycle) == (0.0, 2)
    empty = new_automaton([], cycle=0)
    assert (empty.actions, empty.probs, empty.enabled) == ((), [], [])


def test_reward_penalty_and_disabled_action_by_hand() -> None:
    aut = new_automaton(["a", "b", "c", "d"], cycle=0)  # p = (0.25, 0.25, 0.25, 0.25)
    aut = disable(aut, 3)  # d's page was visited by another path: no learning
    assert aut.probs == [0.25] * 4

    # Reward a with L_R-I, a = 0.09, enabled {a, b, c}: K = 0.75, p̂ = (1/3, 1/3, 1/3).
    # eq. 1: p̂_a = 1/3 + 0.09·(2/3) = 0.393333…, p̂_b = p̂_c = 0.91·(1/3) = 0.303333…
    # rescale by K: p_a = 0.295, p_b = p_c = 0.2275; d (disabled) stays 0.25.
    aut, rewarded = reinforce(aut, 0, sim=0.6, params=LRI)  # sim 0.6 ≥ τ = 0: reward
    assert rewarded
    assert aut.probs == pytest.approx([0.295, 0.2275, 0.2275, 0.25], abs=1e-15)
    assert aut.probs[3] == 0.25  # disabled: exactly unchanged
    assert aut.tau == 0.6  # τ ← sim
    assert aut.enabled == [False, True, True, False]  # a disabled for this cycle

    # Penalise b with L_R-P (b = a = 0.09), enabled {b, c}: K = 0.455, p̂ = (0.5, 0.5), r = 2.
    # eq. 2: p̂_b = 0.91·0.5 = 0.455, p̂_c = 0.09/1 + 0.91·0.5 = 0.545.
    # rescale: p_b = 0.455·0.455 = 0.207025, p_c = 0.545·0.455 = 0.247975.
    outside = (aut.probs[0], aut.probs[3])
    aut, rewarded = reinforce(aut, 1, sim=0.5, params=LRP)  # 0.5 < τ = 0.6: penalty
    assert not rewarded
    assert aut.probs == pytest.approx([0.295, 0.207025, 0.247975, 0.25], abs=1e-15)
    assert (aut.probs[0], aut.probs[3]) == outside  # outside the subset: bit-for-bit kept
    assert aut.tau == 0.6  # a penalty leaves τ alone
    assert aut.enabled == [False, False, True, False]
    assert math.fsum(aut.probs) == pytest.approx(1.0, abs=1e-12)


def test_penalty_spreads_over_r_minus_one() -> None:
    # L_R-P a = b = 0.09 on 3 enabled actions p = (0.5, 0.3, 0.2), penalise 0 (K = 1):
    # p̂_0 = 0.91·0.5 = 0.455; p̂_1 = 0.09/2 + 0.91·0.3 = 0.318; p̂_2 = 0.045 + 0.182 = 0.227.
    aut = update(aut_of([0.5, 0.3, 0.2]), 0, rewarded=False, params=LRP)
    assert aut.probs == pytest.approx([0.455, 0.318, 0.227], abs=1e-15)
    # L_R-εP, b = 0.009: p̂_0 = 0.991·0.5 = 0.4955; p̂_1 = 0.0045 + 0.2973 = 0.3018;
    # p̂_2 = 0.0045 + 0.1982 = 0.2027.
    lrep = LearningParams(a=0.09, scheme=Scheme.LREP)
    aut = update(aut_of([0.5, 0.3, 0.2]), 0, rewarded=False, params=lrep)
    assert aut.probs == pytest.approx([0.4955, 0.3018, 0.2027], abs=1e-15)


def test_lri_penalty_is_inaction_and_single_action_is_fixed() -> None:
    start = aut_of([0.5, 0.3, 0.2])
    assert update(start, 1, rewarded=False, params=LRI).probs == [0.5, 0.3, 0.2]  # b = 0
    # One enabled action: eq. 2 would divide by r − 1 = 0; p̂ = 1 in every case, no change.
    one = aut_of([0.5, 0.3, 0.2], enabled=[False, True, False])
    assert update(one, 1, rewarded=False, params=LRP).probs == [0.5, 0.3, 0.2]
    assert update(one, 1, rewarded=True, params=LRP).probs == [0.5, 0.3, 0.2]


def test_update_does_not_disable_and_does_not_mutate() -> None:
    start = aut_of([0.5, 0.3, 0.2])
    after = update(start, 2, rewarded=True, params=LRI)
    assert after.enabled == [True, True, True]
    assert start.probs == [0.5, 0.3, 0.2]  # argument untouched
    # eq. 1 with K = 1: p_2 = 0.2 + 0.09·0.8 = 0.272, p_0 = 0.455, p_1 = 0.273
    assert after.probs == pytest.approx([0.455, 0.273, 0.272], abs=1e-15)


def test_update_of_a_disabled_action_learns_over_its_choice_subset() -> None:
    # Action 1 was chosen from {0, 1}, then disabled (its page reached by another path);
    # the echo still teaches over {0, 1}: K = 0.8, p̂ = (0.625, 0.375);
    # eq. 1: p̂_1 = 0.375 + 0.09·0.625 = 0.43125, p̂_0 = 0.91·0.625 = 0.56875;
    # rescale: p_1 = 0.345, p_0 = 0.455; action 2 (disabled, not chosen) keeps 0.2.
    aut = aut_of([0.5, 0.3, 0.2], enabled=[True, False, False])
    after = update(aut, 1, rewarded=True, params=LRI)
    assert after.probs == pytest.approx([0.455, 0.345, 0.2], abs=1e-15)
    assert after.enabled == [True, False, False]


def test_reinforce_threshold_and_tolerance() -> None:
    aut = aut_of([0.25] * 4, tau=0.6)
    after, rewarded = reinforce(aut, 0, 0.6 - 1e-12, LRI)  # within tolerance 1e-9: reaches τ
    assert rewarded
    assert after.tau == 0.6  # τ = max(τ, sim): never moves down
    # rewarded with K = 1: p_0 = 0.25 + 0.09·0.75 = 0.3175
    assert after.probs[0] == pytest.approx(0.3175, abs=1e-15)
    _, rewarded = reinforce(aut, 0, 0.6 - 1e-8, LRI)
    assert not rewarded
    with pytest.raises(ValueError):
        reinforce(aut, 0, math.nan, LRI)
    with pytest.raises(ValueError):
        reinforce(aut, 4, 0.7, LRI)
    with pytest.raises(ValueError):
        update(aut, -1, True, LRI)
    with pytest.raises(ValueError):
        disable(aut, 9)


# --- choose --------------------------------------------------------------------------------


def test_choose_inverse_cdf_by_hand() -> None:
    aut = aut_of([0.295, 0.2275, 0.2275, 0.25], enabled=[True, True, True, False])
    # K = 0.75; cumulative over enabled: 0.295, 0.5225, 0.75.
    assert choose(aut, 0.0) == 0  # target 0
    assert choose(aut, 0.39) == 0  # target 0.2925 < 0.295
    assert choose(aut, 0.5) == 1  # target 0.375 in [0.295, 0.5225)
    assert choose(aut, 0.7) == 2  # target 0.525 in [0.5225, 0.75)
    assert choose(aut, 1 - 2**-53) == 2  # never the disabled action 3
    with pytest.raises(ValueError):
        choose(aut, 1.0)


def test_choose_when_enabled_mass_underflowed_is_uniform() -> None:
    aut = aut_of([1.0, 0.0, 0.0], enabled=[False, True, True])
    assert choose(aut, 0.2) == 1
    assert choose(aut, 0.7) == 2


def test_start_cycle_reenables_and_all_disabled_returns_none() -> None:
    aut = new_automaton(["a", "b", "c"], cycle=1)
    for i in range(3):
        aut, _ = reinforce(aut, i, 0.5 + i / 10, LRI)
    assert choose(aut, 0.3) is None  # nothing enabled: the page is popped
    assert start_cycle(aut, 1).enabled == [False] * 3  # same cycle: nothing changes
    again = start_cycle(aut, 2)
    assert again.enabled == [True] * 3
    assert again.cycle == 2
    assert again.tau == aut.tau == 0.7  # learning carries into the next cycle
    assert again.probs == aut.probs
    assert choose(again, 0.3) is not None


# --- eqs. 7 and 8 by hand --------------------------------------------------------------


def test_eq7_add_one_link_to_three() -> None:
    aut = Automaton(("a", "b", "c"), [0.5, 0.3, 0.2], [True, False, True], 0.4, 3)
    after = relink(aut, ["a", "b", "c", "d"])
    # |u(i)| = 4: p_d = 1/4; others × 3/4: 0.375, 0.225, 0.15
    assert after.actions == ("a", "b", "c", "d")
    assert after.probs == pytest.approx([0.375, 0.225, 0.15, 0.25], abs=1e-15)
    assert after.enabled == [True, False, True, True]  # kept flags, new link enabled
    assert (after.tau, after.cycle) == (0.4, 3)  # only additions: τ kept


def test_eq8_remove_one_link_of_four() -> None:
    aut = Automaton(("a", "b", "c", "d"), [0.4, 0.3, 0.2, 0.1], [True] * 4, 0.4, 0)
    after = relink(aut, ["d", "a", "b"])  # c removed, order changed
    # eq. 8 with p_c = 0.2: factor 1 + 0.2/0.8 = 1.25 → a 0.5, b 0.375, d 0.125
    assert after.actions == ("d", "a", "b")
    assert after.probs == pytest.approx([0.125, 0.5, 0.375], abs=1e-15)
    assert after.tau == 0.0  # a link removed: τ restarts (eq. 6 is over current links)


def test_relink_remove_and_add() -> None:
    aut = Automaton(("a", "b", "c", "d"), [0.4, 0.3, 0.2, 0.1], [True] * 4, 0.0, 0)
    after = relink(aut, ["a", "b", "e", "f"])
    # eq. 8 twice: a, b divided by the kept mass 0.7 → 4/7, 3/7;
    # eq. 7 twice (|u| = 3 then 4): e and f end at 1/4, a and b × 2/4 → 2/7, 3/14.
    assert after.probs == pytest.approx([2 / 7, 3 / 14, 0.25, 0.25], abs=1e-15)
    # all of the mass removed: eq. 8 undefined, the kept actions restart uniform
    lopsided = Automaton(("a", "b", "c"), [1.0, 0.0, 0.0], [True] * 3, 0.0, 0)
    assert relink(lopsided, ["b", "c"]).probs == [0.5, 0.5]
    assert relink(aut, []).probs == []


# --- properties ------------------------------------------------------------------------

URL_CHARS = st.characters(codec="utf-8", min_codepoint=32)  # no line feed: URLs hold none
urls = st.text(URL_CHARS, min_size=1, max_size=12)
params_st = st.builds(
    LearningParams,
    a=st.floats(0.001, 0.9),
    scheme=st.sampled_from(list(Scheme)),
    epsilon=st.floats(0.01, 1.0),
)
ops = st.one_of(
    st.tuples(st.just("update"), st.integers(0, 50), st.booleans(), params_st),
    st.tuples(st.just("reinforce"), st.integers(0, 50), st.floats(-1, 1), params_st),
    st.tuples(st.just("choose_reinforce"), st.floats(0, 1, exclude_max=True), st.floats(0, 1)),
    st.tuples(st.just("disable"), st.integers(0, 50)),
    st.tuples(st.just("relink"), st.lists(urls, max_size=8)),
    st.tuples(st.just("start_cycle"), st.integers(0, 3)),
)


def assert_valid(aut: Automaton) -> None:
    assert len(aut.probs) == len(aut.enabled) == len(aut.actions) == len(set(aut.actions))
    assert all(p >= 0.0 for p in aut.probs)
    if aut.actions:
        assert math.fsum(aut.probs) == pytest.approx(1.0, abs=1e-9)


def apply(aut: Automaton, op: tuple[Any, ...]) -> Automaton:
    """One step of a generated sequence; indices are taken modulo the action count."""
    n = len(aut.actions)
    match op:
        case ("update", idx, rewarded, params) if n:
            return update(aut, idx % n, rewarded, params)
        case ("reinforce", idx, sim, params) if n:
            return reinforce(aut, idx % n, sim, params)[0]
        case ("choose_reinforce", u, sim):
            chosen = choose(aut, u)
            if chosen is None:
                assert not any(aut.enabled)
                return aut
            assert aut.enabled[chosen]
            return reinforce(aut, chosen, sim, LRP)[0]
        case ("disable", idx) if n:
            return disable(aut, idx % n)
        case ("relink", links):
            return relink(aut, links)
        case ("start_cycle", step):
            return start_cycle(aut, aut.cycle + step)
    return aut


@settings(max_examples=300, deadline=None)
@given(st.lists(urls, max_size=8), st.lists(ops, max_size=40))
def test_any_sequence_keeps_a_distribution(
    actions: list[str], steps: list[tuple[Any, ...]]
) -> None:
    aut = new_automaton(actions, cycle=0)
    assert_valid(aut)
    for op in steps:
        before = (list(aut.probs), list(aut.enabled))
        aut = apply(aut, op)
        assert_valid(aut)
        if op[0] == "disable" and aut.actions:
            assert aut.probs == before[0]  # disabling never learns


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
    st.floats(0, 1, exclude_max=True),
)
def test_choose_never_returns_a_disabled_action(
    weights: list[float], mask: list[bool], u: float
) -> None:
    total = math.fsum(weights)
    probs = [w / total for w in weights] if total > 0 else [1 / len(weights)] * len(weights)
    aut = aut_of(probs, mask[: len(weights)])
    got = choose(aut, u)
    if not any(aut.enabled):
        assert got is None
    else:
        assert got is not None and aut.enabled[got]
        if any(aut.probs[i] > 0 for i in range(len(probs)) if aut.enabled[i]):
            assert aut.probs[got] > 0


def test_choose_at_the_top_of_a_rounded_down_sum() -> None:
    # Ten actions of 0.1 sum (left to right) to 0.9999999999999999, while K = fsum = 1.0;
    # with u = 1 − 2⁻⁵³ the target u·K equals that running sum, so the walk ends without a
    # pick. The fallback is the last enabled action with p > 0 (9): not the disabled 11th,
    # and not the enabled 10th whose probability is 0.
    aut = aut_of([0.1] * 10 + [0.0, 0.0], enabled=[True] * 11 + [False])
    assert choose(aut, 1 - 2**-53) == 9


# --- Theorem 1 -----------------------------------------------------------------------------


def two_armed_run(seed: int, a: float, steps: int) -> float:
    """p_0 after `steps` L_R-I steps where action 0 is rewarded w.p. 0.8 and action 1 w.p. 0.4."""
    aut = new_automaton(["best", "worse"], cycle=0)
    params = LearningParams(a=a, scheme=Scheme.LRI)
    reward_probability = (0.8, 0.4)
    for k in range(steps):
        i = choose(aut, uniform_draw(seed, "choose", k))
        assert i is not None
        rewarded = uniform_draw(seed, "environment", k) < reward_probability[i]
        aut = update(aut, i, rewarded, params)
    return aut.probs[0]


def test_theorem1_small_rate_converges_to_the_best_action() -> None:
    # The mean drift of p_0 is a·p_0·(1 − p_0)·(0.8 − 0.4) (eq. 11), i.e. its log-odds grow by
    # about 0.004 a step at a = 0.01: from 0 to ln 19 (p_0 = 0.95) in ~740 steps. 2,000 steps
    # leave a margin (measured: all 20 runs end above 0.976).
    finals = [two_armed_run(seed, a=0.01, steps=2000) for seed in range(20)]
    assert sum(p > 0.95 for p in finals) >= 19


def test_theorem1_large_rate_sometimes_locks_onto_the_worse_action() -> None:
    # With a = 0.5 one reward moves half the remaining mass, so a few early rewards of the
    # worse action absorb the automaton there (L_R-I never leaves a unit vector). The proof's
    # bound: Γ ≥ φ = (e^(−x·0.5/a) − 1)/(e^(−x/a) − 1) with V[x*] = 1/(0.4/0.8) = 2, x* ≈ 1.2564,
    # gives φ ≈ 0.778, so at most ~22 % of runs (44 of 200) should lock onto the worse action.
    # Measured: 42 of these 200 runs (21 %), all absorbed within 200 steps; over 4,000 seeds
    # the rate was 19 % (754 and 771 for two choices of draw keys): the bound holds, and
    # locking onto the worse link is common, which is why the rate must be small.
    finals = [two_armed_run(seed, a=0.5, steps=200) for seed in range(200)]
    worse = sum(p < 1e-6 for p in finals)
    best = sum(p > 1 - 1e-6 for p in finals)
    assert worse + best == 200  # every run absorbed at a unit vector
    assert worse == 42
    assert worse <= 44  # within the proof's bound 1 − φ


# --- uniform_draw --------------------------------------------------------------------------


def test_uniform_draw_is_repeatable_and_spread() -> None:
    assert uniform_draw(7, "http://x.test/", 3) == uniform_draw(7, "http://x.test/", 3)
    draws = {uniform_draw(7, "http://x.test/", k) for k in range(1000)}
    assert len(draws) == 1000
    assert all(0.0 <= d < 1.0 for d in draws)
    assert 0.45 < sum(draws) / 1000 < 0.55  # mean of 1000 uniforms: sd ≈ 0.009
    assert uniform_draw(8, "http://x.test/", 3) != uniform_draw(7, "http://x.test/", 3)
    assert uniform_draw(7, "http://x.test/a", 3) != uniform_draw(7, "http://x.test/", 3)
    with pytest.raises(ValueError):
        uniform_draw(7, "k", -1)


# --- codec ---------------------------------------------------------------------------------


@st.composite
def automata(draw: st.DrawFn) -> Automaton:
    actions = draw(st.lists(urls, max_size=20, unique=True))
    weights = draw(st.lists(st.floats(0.0, 1.0), min_size=len(actions), max_size=len(actions)))
    r = len(actions)
    total = math.fsum(weights)
    if total > 0 and abs(math.fsum(w / total for w in weights) - 1) <= 1e-9:
        probs = [w / total for w in weights]
    else:
        probs = [1 / r for _ in range(r)]
    enabled = draw(st.lists(st.booleans(), min_size=len(actions), max_size=len(actions)))
    tau = draw(st.floats(-1, 1))
    cycle = draw(st.integers(-(2**63), 2**63 - 1))
    return Automaton(tuple(actions), probs, enabled, tau, cycle)


@st.composite
def states(draw: st.DrawFn) -> LafcState:
    aut = draw(st.none() | automata())
    r = 0 if aut is None else len(aut.actions)
    i64 = st.integers(-(2**63), 2**63 - 1)
    return LafcState(
        automaton=aut,
        sim=draw(st.floats(allow_nan=False, allow_infinity=False)),
        fetched_cycle=draw(i64),
        push_ms=draw(i64),
        pending=draw(st.integers(-1, r - 1)),
        draws=draw(st.integers(0, 2**64 - 1)),
    )


@pytest.mark.parametrize("bad", [("a\nb",), ("",), ("a", "")])
def test_codec_refuses_actions_that_are_not_urls(bad: tuple[str, ...]) -> None:
    # the actions travel joined by line feeds: an empty one or one with a line feed cannot
    aut = Automaton(bad, [1 / len(bad)] * len(bad), [True] * len(bad), 0.0, 0)
    with pytest.raises(StateCodecError):
        encode_lafc(LafcState(automaton=aut))


@settings(max_examples=300, deadline=None)
@given(states())
def test_codec_round_trips_exactly(state: LafcState) -> None:
    data = encode_lafc(state)
    assert data[0] == 1  # version byte
    back = decode_lafc(data)
    assert back == state
    assert encode_lafc(back) == data


@settings(max_examples=150, deadline=None)
@given(states())
def test_codec_refuses_every_truncation(state: LafcState) -> None:
    data = encode_lafc(state)
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            decode_lafc(data[:cut])
    with pytest.raises(ValueError):
        decode_lafc(data + b"\x00")  # trailing bytes


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_codec_garbage_raises_only_value_error(data: bytes) -> None:
    try:
        state = decode_lafc(data)
    except ValueError:
        return
    assert encode_lafc(state) == data  # whatever decodes is a canonical encoding


@settings(max_examples=200, deadline=None)
@given(states(), st.data())
def test_codec_flipped_bytes_raise_only_value_error(state: LafcState, data: st.DataObject) -> None:
    raw = bytearray(encode_lafc(state))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(ValueError):  # anything but a ValueError fails the test
        decode_lafc(bytes(raw))


def test_codec_examples_by_hand() -> None:
    unfetched = LafcState(automaton=None)
    # version 1, flags 0, sim −1.0, zigzag(−1) = 1 for fetched_cycle, push_ms, pending, draws 0
    assert encode_lafc(unfetched) == b"\x01\x00" + struct.pack("<d", -1.0) + b"\x01\x01\x01\x00"
    aut = Automaton(("é/ü", "http://例え.jp/"), [0.75, 0.25], [False, True], 0.5, 2)
    state = LafcState(aut, sim=0.8, fetched_cycle=2, push_ms=1_700_000_000_000, pending=1)
    data = encode_lafc(state)
    assert data[-1] == 0b10  # mask: action 1 enabled, action 0 not
    assert decode_lafc(data) == state
    empty = LafcState(new_automaton([], 0), sim=0.1, fetched_cycle=0)
    assert decode_lafc(encode_lafc(empty)) == empty


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x02" + b"\x00" * 20,  # unknown version
        b"\x01\x02" + struct.pack("<d", 0.0) + b"\x00\x00\x00\x00",  # unknown flag
        b"\x01\x00" + struct.pack("<d", math.nan) + b"\x00\x00\x00\x00",  # NaN similarity
        b"\x01\x00" + struct.pack("<d", 0.0) + b"\x80\x00\x00\x00\x00",  # non-minimal varint
        b"\x01\x00" + struct.pack("<d", 0.0) + b"\x00\x00\x02\x00",  # pending 1, no automaton
        # automaton with r = 10**9 actions in a few bytes: refused before allocating
        b"\x01\x01"
        + struct.pack("<d", 0.0)
        + b"\x00\x00\x00\x00\x00"
        + struct.pack("<d", 0.0)
        + b"\x80\x94\xeb\xdc\x03",
    ],
)
def test_codec_refuses_malformed_bytes(bad: bytes) -> None:
    with pytest.raises(StateCodecError):
        decode_lafc(bad)


def test_codec_refuses_invalid_states_on_encode() -> None:
    bad_sum = Automaton(("a", "b"), [0.5, 0.6], [True, True], 0.0, 0)
    with pytest.raises(StateCodecError):
        encode_lafc(LafcState(bad_sum))
    with pytest.raises(StateCodecError):
        encode_lafc(LafcState(new_automaton(["a"], 0), pending=1))
    with pytest.raises(StateCodecError):
        encode_lafc(LafcState(None, sim=math.inf))
    with pytest.raises(StateCodecError):
        encode_lafc(LafcState(None, draws=-1))
