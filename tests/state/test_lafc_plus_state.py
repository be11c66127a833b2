"""LAFC+'s per-page rules (state/lafc_plus.py), each with values worked out by hand, and its
encoding."""

from __future__ import annotations

import math
import struct
from dataclasses import replace

import pytest

from frontierflow.state.lafc_plus import (
    SEEN,
    UNKNOWN,
    LafcPlusParams,
    LafcPlusState,
    answered,
    best_action,
    child_path,
    choosing,
    credited,
    credits_along,
    harvest,
    link_order,
    page_worth,
    refetched,
    untried_value,
)
from frontierflow.state.lafc_plus_codec import decode_lafc_plus, encode_lafc_plus
from frontierflow.state.relevance import Topic
from frontierflow.state.storage.codec import StateCodecError

A, B, C, D = (f"https://w.invalid/{x}" for x in "abcd")


def _page(values: list[float], sim: float = 0.3, **kw: object) -> LafcPlusState:
    actions = (A, B, C, D)[: len(values)]
    return LafcPlusState(actions, values, [True] * len(values), sim, **kw)


def test_worth_is_the_similarity_graded_by_keyword_evidence() -> None:
    topic = Topic.parse("net tcp")
    # {net: 2}: cosine = 2 / (√2 · 2) = 1/√2; 2 occurrences of 4 asked for halve it
    assert page_worth(topic, {"net": 2}, LafcPlusParams()) == pytest.approx(1 / math.sqrt(2))
    graded = page_worth(topic, {"net": 2}, LafcPlusParams(evidence=4))
    assert graded == pytest.approx(0.5 / math.sqrt(2))
    # 4 or more occurrences: the cosine unchanged ({net: 3, tcp: 3}: cosine 1)
    assert page_worth(topic, {"net": 3, "tcp": 3}, LafcPlusParams(evidence=4)) == 1.0


def test_refetch_keeps_estimates_by_url_enables_all_and_records_the_path() -> None:
    old = LafcPlusState((A, B, C), [0.4, UNKNOWN, 0.9], [False, True, False], 0.2, 0.35, 3, 0, 1)
    new = refetched(old, [C, D, A, C], 0.6, 1, (B,))
    assert new.actions == (C, D, A)
    assert new.values == [0.9, UNKNOWN, 0.4]
    assert new.enabled == [True, True, True]
    assert (new.sim, new.future, new.answers, new.fetched_cycle, new.pending) == (
        0.6,
        0.35,
        3,
        1,
        -1,
    )
    assert new.path == (B,)
    assert old.values == [0.4, UNKNOWN, 0.9]  # the argument is not mutated
    with pytest.raises(ValueError, match="worth"):
        refetched(old, [A], math.nan, 1)


def test_harvest_is_the_pages_worth_until_answers_then_a_floored_running_mean() -> None:
    state = _page([UNKNOWN] * 4, sim=0.6)
    assert harvest(state) == 0.6
    params = LafcPlusParams(rate=0.2, harvest_untried=0)  # every answer, known or not
    # step max(0.2, 1/n): n = 1 → F = 0.2; n = 2 → 0.2 + (0.8 − 0.2)/2 = 0.5;
    # n = 3 → 0.5 + (0 − 0.5)/3 = 1/3; n = 4 → 1/3 + (1 − 1/3)/4 = 0.5;
    # n = 5 → 0.5 + 0.2·(0 − 0.5) = 0.4 (the floor a = 0.2 now wins over 1/5 = 0.2)
    expected = [0.2, 0.5, 1 / 3, 0.5, 0.4]
    rewards = [0.2, 0.8, 0.0, 1.0, 0.0]
    for index, (reward, want) in enumerate(zip(rewards, expected, strict=True)):
        state = answered(state, index % 4, reward, params)
        assert state.future == pytest.approx(want)
        assert state.answers == index + 1
        assert harvest(state) == pytest.approx(want)
    # n = 6: 0.4 + 0.2·(0 − 0.4) = 0.32 (1/6 < 0.2)
    assert answered(state, 0, 0.0, params).future == pytest.approx(0.32)


def test_harvest_takes_in_only_the_answers_to_links_untried_when_chosen() -> None:
    # H = 0.3 after n = 2 answers; the page knows its first link (0.9), not its second,
    # and its third was answered 208 (SEEN). a = 0.5.
    state = _page([0.9, UNKNOWN, SEEN], future=0.3, answers=2)
    params = LafcPlusParams(rate=0.5)  # harvest_untried = 1, the default
    # the known link chosen again earns 0.9 again: its estimate stays, H and n do not move
    again = answered(state, 0, 0.9, params)
    assert (again.values[0], again.future, again.answers) == (0.9, 0.3, 2)
    # the untried link earns 0.1: n = 3, H = 0.3 + max(0.5, 1/3)·(0.1 − 0.3) = 0.2
    fresh = answered(state, 1, 0.1, params)
    assert (fresh.values[1], fresh.answers) == (0.1, 3)
    assert fresh.future == pytest.approx(0.2)
    # a SEEN link had no estimate either: 0.5 moves H to 0.3 + 0.5·(0.5 − 0.3) = 0.4
    seen = answered(state, 2, 0.5, params)
    assert (seen.values[2], seen.answers) == (0.5, 3)
    assert seen.future == pytest.approx(0.4)
    # the first LAFC+ takes in every reward: 0.3 + 0.5·(0.9 − 0.3) = 0.6 after the known one
    every = answered(state, 0, 0.9, LafcPlusParams(rate=0.5, harvest_untried=0))
    assert (every.answers, every.future) == (3, pytest.approx(0.6))
    # so after the known 0.9 the page's untried link (explore 0, no bonus) is worth H = 0.3
    # and a third link known at 0.45 comes first; taking in every reward it would be worth
    # 0.6 and come before the known 0.45
    plain = LafcPlusParams(explore=0.0, shallow=0.0)
    first = LafcPlusParams(explore=0.0, shallow=0.0, harvest_untried=0)
    known = _page([0.9, UNKNOWN, 0.45], future=0.3, answers=2)
    assert best_action(answered(known, 0, 0.9, plain), plain) == (2, 0.45)
    assert best_action(answered(known, 0, 0.9, first), first) == (1, pytest.approx(0.6))


def test_an_answer_sets_the_estimate_and_disables_the_action() -> None:
    state = _page([UNKNOWN, 0.7], sim=0.3, pending=0)
    new = answered(state, 0, 0.25, LafcPlusParams())
    assert new.values == [0.25, 0.7]
    assert new.enabled == [False, True]
    assert new.pending == -1
    assert (new.future, new.answers) == (0.25, 1)
    # an answer for a page already fetched this cycle teaches nothing
    seen = answered(state, 1, None, LafcPlusParams())
    assert seen.values == [UNKNOWN, 0.7]
    assert seen.enabled == [True, False]
    assert (seen.future, seen.answers) == (0.0, 0)
    assert state.enabled == [True, True]  # the argument is not mutated
    with pytest.raises(ValueError, match="out of range"):
        answered(state, 2, 0.1, LafcPlusParams())
    with pytest.raises(ValueError, match="reward"):
        answered(state, 0, math.inf, LafcPlusParams())


def test_choice_is_the_best_estimate_an_untried_action_counting_as_optimistic_harvest() -> None:
    params = LafcPlusParams(explore=0.25, shallow=0.0)
    # no answers: untried = worth 0.25 + 0.25/√1 = 0.5
    state = _page([0.4, UNKNOWN, 0.6], sim=0.25)
    assert untried_value(state, params) == 0.5
    assert best_action(state, params) == (2, 0.6)
    state.enabled[2] = False
    assert best_action(state, params) == (1, 0.5)
    # a tie goes to the first in page order
    assert best_action(_page([0.5, UNKNOWN], sim=0.25), params) == (0, 0.5)
    # three answers with F = 0.2: untried = 0.2 + 0.25/√4 = 0.325 < 0.4
    learned = _page([0.4, UNKNOWN], sim=0.9, future=0.2, answers=3)
    assert best_action(learned, params) == (0, 0.4)
    # with the default explore = 0.15, shallow = 0.3 and the gap at a seed (no path, h = 0):
    # 0.2 + 0.15/2 + (1 − 0.2)·0.3/1 = 0.515
    assert untried_value(learned, LafcPlusParams()) == pytest.approx(0.515)
    learned.enabled[:] = [False, False]
    assert best_action(learned, params) is None


def test_untried_links_of_pages_near_a_seed_are_worth_more() -> None:
    params = LafcPlusParams(explore=0.2, shallow=0.3, shallow_gap=0)
    # worth 0.1, no answers: 0.1 + 0.2/√1 + 0.3/(1 + h)
    seed = _page([UNKNOWN], sim=0.1)
    assert untried_value(seed, params) == pytest.approx(0.6)  # h = 0: + 0.3
    child = _page([UNKNOWN], sim=0.1, path=("S",))
    assert untried_value(child, params) == pytest.approx(0.45)  # h = 1: + 0.15
    deep = _page([UNKNOWN], sim=0.1, path=("P", "G", "S"))
    assert untried_value(deep, params) == pytest.approx(0.375)  # h = 3: + 0.075
    # three answers with H = 0.2 at h = 1: 0.2 + 0.2/√4 + 0.15 = 0.45, above a known 0.4
    learned = _page([0.4, UNKNOWN], sim=0.9, future=0.2, answers=3, path=("S",))
    assert best_action(learned, params) == (1, pytest.approx(0.45))
    # without the bonus (the first LAFC+) the known 0.4 wins over 0.3
    assert best_action(learned, LafcPlusParams(explore=0.2, shallow=0.0)) == (0, 0.4)
    # with p = 2 the bonus is 0.3/(1 + h)²: + 0.3 at the seed, + 0.075 at h = 1, + 0.01875 at h = 3
    squared = LafcPlusParams(explore=0.2, shallow=0.3, shallow_power=2, shallow_gap=0)
    assert untried_value(seed, squared) == pytest.approx(0.6)
    assert untried_value(child, squared) == pytest.approx(0.375)
    assert untried_value(deep, squared) == pytest.approx(0.31875)
    # with the gap, the bonus times 1 − H: worth 0.1 at h = 1 gets 0.15 × 0.9 = 0.135, and a
    # page whose links earned H = 0.9 at h = 0 gets 0.3 × 0.1 = 0.03 over its 0.9 + 0.2/√2
    gap = LafcPlusParams(explore=0.2, shallow=0.3, shallow_gap=1)
    assert untried_value(child, gap) == pytest.approx(0.1 + 0.2 + 0.135)
    paid = _page([0.9, UNKNOWN], sim=0.1, future=0.9, answers=1)
    assert untried_value(paid, gap) == pytest.approx(0.9 + 0.2 / math.sqrt(2) + 0.03)


def test_link_order_puts_links_named_for_the_topic_first_when_asked() -> None:
    topic = Topic.parse("socket tcp")
    links = [
        "https://h.invalid/a/index.html",  # no keyword: 0
        "https://h.invalid/b/Socket.html",  # socket only: cosine 1/√2
        "https://h.invalid/c/tcp-socket.html",  # both: 1
        "https://tcp.invalid/d/other.html",  # the host is not counted: 0
    ]
    assert link_order(topic, links, LafcPlusParams()) == tuple(links)  # default: page order
    ordered = link_order(topic, links, LafcPlusParams(url_order=1))
    assert ordered == (links[2], links[1], links[0], links[3])  # page order among equals


def test_credit_flows_up_the_path_discounted_per_hop() -> None:
    params = LafcPlusParams(gamma=0.5, depth=3)
    # the page chosen by P, itself chosen by G, itself by GG, earned 0.8: P's answer is
    # direct (d = 0); G's action P gets 0.5·0.8, GG's action G gets 0.25·0.8
    path = ("P", "G", "GG")
    assert credits_along(path, 0.8, params) == [("G", "P", 0.4), ("GG", "G", 0.2)]
    assert credits_along(path, 0.8, LafcPlusParams(gamma=0.5, depth=2)) == [("G", "P", 0.4)]
    assert credits_along(path, 0.8, LafcPlusParams(depth=1)) == []
    assert credits_along(("P",), 0.8, params) == []
    state = _page([0.1, 0.7, UNKNOWN], path=("X", "Y", "Z"))
    assert child_path("K", state, params) == ("K", "X", "Y")


def test_by_default_a_path_is_worth_its_best_reward_six_pages_up() -> None:
    # γ = 1, depth 6: every page up to 5 hops above the one that chose gets the reward
    # itself (γ^d = 1); the 7th page of the path (6 hops up) gets nothing
    path = ("P1", "P2", "P3", "P4", "P5", "P6", "P7")
    assert credits_along(path, 0.6, LafcPlusParams()) == [
        ("P2", "P1", 0.6),
        ("P3", "P2", 0.6),
        ("P4", "P3", 0.6),
        ("P5", "P4", 0.6),
        ("P6", "P5", 0.6),
    ]
    assert child_path("K", _page([0.1], path=path[:6]), LafcPlusParams()) == ("K", *path[:5])


def test_an_already_fetched_answer_marks_an_unknown_action_seen() -> None:
    state = _page([UNKNOWN, 0.7, UNKNOWN], sim=0.3)
    seen = answered(state, 0, None, LafcPlusParams())
    assert seen.values == [SEEN, 0.7, UNKNOWN]
    assert seen.enabled == [False, True, True]
    assert (seen.future, seen.answers) == (0.0, 0)  # nothing learned about the harvest
    # a known estimate is kept (the page learned it from a download in an earlier cycle)
    assert answered(state, 1, None, LafcPlusParams()).values == [UNKNOWN, 0.7, UNKNOWN]
    # the first LAFC+ (skip_seen = 0) leaves it untried
    assert answered(state, 0, None, LafcPlusParams(skip_seen=0)).values == state.values
    # a later download replaces the mark: estimate 0.6, H = 0.6 (n = 1)
    learned = answered(seen, 0, 0.6, LafcPlusParams())
    assert learned.values == [0.6, 0.7, UNKNOWN]
    assert (learned.future, learned.answers) == (0.6, 1)
    # a credit raises it like any estimate
    assert credited(seen, A, 0.5).values == [0.5, 0.7, UNKNOWN]
    # a new cycle enables it again and keeps the mark
    again = refetched(seen, [A, B, C], 0.3, 1)
    assert again.values == [SEEN, 0.7, UNKNOWN] and again.enabled == [True] * 3


def test_an_already_fetched_answer_copies_the_estimates_only_to_mark_one() -> None:
    # a 208 answer that changes no estimate shares the list (no rule changes one in place);
    # one that marks an action seen copies it, and the state answered keeps its own
    state = _page([UNKNOWN, 0.7, SEEN], sim=0.3)
    before = list(state.values)
    for index in (1, 2):
        assert answered(state, index, None, LafcPlusParams()).values is state.values
    assert answered(state, 0, None, LafcPlusParams(skip_seen=0)).values is state.values
    marked = answered(state, 0, None, LafcPlusParams())
    assert marked.values == [SEEN, 0.7, SEEN] and state.values == before
    assert answered(state, 1, 0.4, LafcPlusParams()).values is not state.values
    assert decode_lafc_plus(encode_lafc_plus(marked)) == marked


def test_a_seen_action_is_chosen_after_every_other_at_estimate_zero() -> None:
    params = LafcPlusParams(explore=0.15, shallow=0.0)
    # no answers: untried = worth 0.1 + 0.15/√1 = 0.25 > 0.0 (a known zero) > SEEN
    state = _page([SEEN, 0.0, UNKNOWN, SEEN], sim=0.1)
    assert best_action(state, params) == (2, 0.25)
    state.enabled[2] = False
    assert best_action(state, params) == (1, 0.0)  # a known 0 still comes before SEEN
    state.enabled[1] = False
    assert best_action(state, params) == (0, 0.0)  # the first SEEN in page order
    state.enabled[0] = False
    assert best_action(state, params) == (3, 0.0)
    state.enabled[3] = False
    assert best_action(state, params) is None


def test_a_credit_only_raises_an_estimate() -> None:
    state = _page([0.1, 0.7, UNKNOWN], pending=2)
    raised = credited(state, A, 0.4)
    assert raised is not None
    assert raised.values == [0.4, 0.7, UNKNOWN]
    assert raised.pending == 2 and raised.enabled == state.enabled
    assert credited(state, B, 0.4) is None  # 0.7 is already better
    assert credited(state, "https://w.invalid/gone", 0.9) is None
    assert credited(state, C, 0.3).values == [0.1, 0.7, 0.3]


@pytest.mark.parametrize(
    "state",
    [
        LafcPlusState(),
        LafcPlusState((A, B, C), [0.5, UNKNOWN, 0.0], [True, False, True], 0.4, 0.25, 7, 2, 1),
        LafcPlusState((A, B), [SEEN, 0.25], [False, True], 0.1, 0.25, 1, 0, -1),
        LafcPlusState(
            tuple(f"https://w.invalid/é{i}" for i in range(13)),
            [UNKNOWN] * 13,
            [i % 3 == 0 for i in range(13)],
            0.0,
            0.0,
            0,
            -1,
            -1,
            (A, B),
        ),
    ],
)
def test_codec_round_trips(state: LafcPlusState) -> None:
    data = encode_lafc_plus(state)
    assert decode_lafc_plus(data) == state


def test_codec_refuses_malformed_states_and_bytes() -> None:
    good = LafcPlusState((A, B), [0.5, UNKNOWN], [True, True], 0.4, 0.25, 1, 0, 1, (C,))
    data = encode_lafc_plus(good)
    with pytest.raises(StateCodecError, match="trailing"):
        decode_lafc_plus(data + b"\x00")
    with pytest.raises(StateCodecError, match="truncated"):
        decode_lafc_plus(data[:-3])
    with pytest.raises(StateCodecError, match="version"):
        decode_lafc_plus(b"\x02" + data[1:])
    for bad in (
        LafcPlusState((A,), [math.nan], [True]),
        LafcPlusState((A,), [-0.5], [True]),
        LafcPlusState((A, B), [UNKNOWN, -1.5], [True, True]),  # negative, not a mark
        LafcPlusState((A, B), [SEEN, -3.0], [True, True]),  # below both marks
        LafcPlusState((A, B), [-0.5, 0.5], [True, True]),  # no mark at all, one negative
        LafcPlusState((A,), [0.1], [2]),  # a flag that is not a boolean
        LafcPlusState((A, A), [0.1, 0.1], [True, True]),
        LafcPlusState((A,), [0.1], [True], pending=1),
        LafcPlusState((A,), [0.1], [True, False]),
        LafcPlusState(("a\nb",), [0.1], [True]),
        LafcPlusState(sim=-0.5),
        LafcPlusState(future=math.inf),
    ):
        with pytest.raises(StateCodecError):
            encode_lafc_plus(bad)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate": 0.0},
        {"rate": 1.5},
        {"gamma": -0.1},
        {"depth": 0},
        {"depth": 2.5},
        {"explore": 2.0},
        {"shallow": -0.1},
        {"shallow": 1.5},
        {"shallow_power": 0},
        {"shallow_power": 1.5},
        {"shallow_gap": 2},
        {"harvest_untried": 2},
        {"url_order": 2},
        {"evidence": -1},
        {"skip_seen": 2},
        {"skip_seen": True},
    ],
)
def test_params_are_validated(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="LAFC\\+"):
        LafcPlusParams(**kwargs)


def test_the_enabled_mask_is_one_bit_per_action_low_bit_first() -> None:
    # 10 actions, enabled 0, 2 and 9: byte 0 = bits 0 and 2 = 0b101 = 5, byte 1 = bit 9 - 8 = 1
    # -> 0b10 = 2. The mask follows the 10 estimates (80 bytes) and precedes the path's two
    # varints (0 pages, 0 bytes).
    actions = tuple(f"https://w.invalid/{i}" for i in range(10))
    state = LafcPlusState(actions, [0.5] * 10, [i in (0, 2, 9) for i in range(10)], 0.1)
    data = encode_lafc_plus(state)
    values = struct.pack("<10d", *[0.5] * 10)
    assert data.endswith(values + b"\x05\x02" + b"\x00\x00")
    assert decode_lafc_plus(data).enabled == state.enabled
    # bits 9 and 10 in byte 1 (0b110): bit 10 is past the last action, refused
    bad = data[:-3] + b"\x06" + data[-2:]
    with pytest.raises(StateCodecError, match="past the end"):
        decode_lafc_plus(bad)


def test_estimates_too_large_to_sum_are_still_finite() -> None:
    # 1e308 + 1e308 overflows to infinity: the check falls back to each value, both finite
    state = LafcPlusState((A, B), [1e308, 1e308], [True, True], 0.1)
    assert decode_lafc_plus(encode_lafc_plus(state)) == state


def test_rules_keep_the_encoded_actions_so_a_write_encodes_only_what_changed() -> None:
    # a decoded page keeps the actions' and the path's bytes it was read from; every rule that
    # keeps the actions (the path) keeps them, and the bytes written are those of the same
    # state built afresh
    page = LafcPlusState((A, B, C), [UNKNOWN, 0.5, SEEN], [True, True, False], 0.2, path=(D,))
    decoded = decode_lafc_plus(encode_lafc_plus(page))
    assert decoded.encoded_actions is not None
    params = LafcPlusParams()
    steps = [
        answered(choosing(decoded, 0), 0, 0.75, params),
        answered(decoded, 1, None, params),
        credited(decoded, C, 0.4),
        refetched(decoded, (A, B, C), 0.3, 1, (D,)),
    ]
    assert decoded.encoded_path is not None
    for state in steps:
        assert state is not None and state.encoded_actions is decoded.encoded_actions
        assert state.encoded_path is decoded.encoded_path
        fresh = replace(
            state,
            values=list(state.values),
            enabled=list(state.enabled),
            encoded_actions=None,
            encoded_path=None,
        )
        assert fresh.encoded_actions is None and fresh.encoded_path is None
        assert encode_lafc_plus(state) == encode_lafc_plus(fresh)
    # new actions, or a new path, are encoded anew
    assert refetched(decoded, (B, A), 0.3, 1, (D,)).encoded_actions is None
    along_c = refetched(decoded, (A, B, C), 0.3, 1, (C, D))
    assert along_c.encoded_path is None
    assert decode_lafc_plus(encode_lafc_plus(along_c)).path == (C, D)


def test_ties_between_a_known_estimate_and_an_untried_link_go_to_page_order() -> None:
    # no optimism and no depth bonus: an untried link is worth the page's own 0.5, as much
    # as a link known to earn 0.5; the first enabled of the two in page order wins
    flat = LafcPlusParams(explore=0.0, shallow=0.0)
    assert best_action(_page([UNKNOWN, 0.5], sim=0.5), flat) == (0, 0.5)
    assert best_action(_page([0.5, UNKNOWN], sim=0.5), flat) == (0, 0.5)
    state = _page([0.5, UNKNOWN, 0.5], sim=0.5)
    state.enabled[0] = False
    assert best_action(state, flat) == (1, 0.5)
    # a known 0.6 beats the untried 0.5 wherever it is; an untried 0.5 beats a known 0.4
    assert best_action(_page([UNKNOWN, 0.4, 0.6], sim=0.5), flat) == (2, 0.6)
    assert best_action(_page([0.4, UNKNOWN], sim=0.5), flat) == (1, 0.5)
    with pytest.raises(ValueError, match="out of range"):
        choosing(state, 3)


def test_local_first_puts_links_of_the_pages_own_section_first_when_asked() -> None:
    # page https://w.invalid/a/b/p.html: folders [w.invalid, a, b]. Shared leading folders:
    # x.html 1 (the host), a/q.html 2, a/b/r.html 3, another host's a/b/s.html 0.
    page = "https://w.invalid/a/b/p.html"
    x, q = "https://w.invalid/x.html", "https://w.invalid/a/q.html"
    r, s = "https://w.invalid/a/b/r.html", "https://o.invalid/a/b/s.html"
    topic = Topic.parse("net")
    links = [x, s, q, r]
    assert link_order(topic, links, LafcPlusParams(), page) == tuple(links)
    assert link_order(topic, links, LafcPlusParams(local_first=1), page) == (r, q, x, s)
    # with url_order the URL's similarity comes first, the section breaks its ties
    net = "https://o.invalid/net.html"
    both = LafcPlusParams(url_order=1, local_first=1)
    assert link_order(topic, [*links, net], both, page) == (net, r, q, x, s)


def test_the_choice_passes_over_disabled_actions_of_the_same_estimate() -> None:
    # no optimism, no depth bonus: an untried link is worth the page's own similarity
    flat = LafcPlusParams(explore=0.0, shallow=0.0)
    # the best known estimate 0.7 is held by actions 0 and 1; 0 was answered this cycle, so
    # the choice is 1 (the untried action 2 is worth 0.2 < 0.7)
    known = LafcPlusState((A, B, C), [0.7, 0.7, UNKNOWN], [False, True, True], 0.2)
    assert best_action(known, flat) == (1, 0.7)
    # nothing known: the first untried action still enabled, 1, at the page's 0.5
    untried = LafcPlusState((A, B, C), [UNKNOWN, UNKNOWN, SEEN], [False, True, True], 0.5)
    assert best_action(untried, flat) == (1, 0.5)


def test_a_state_written_again_unchanged_is_not_encoded_again() -> None:
    page = LafcPlusState((A, B), [UNKNOWN, 0.5], [True, True], 0.2, path=(C,))
    assert page.encoded is None
    data = encode_lafc_plus(page)
    assert page.encoded is data and encode_lafc_plus(page) is data
    # a rule's result and a replaced copy start without the memo and encode what they hold:
    # action 1 (0.5) chosen, answered 0.75 -> its estimate 0.75; a page worth 0.3 instead
    after = answered(choosing(page, 1), 1, 0.75, LafcPlusParams())
    assert after.encoded is None
    assert decode_lafc_plus(encode_lafc_plus(after)).values == [UNKNOWN, 0.75]
    other = replace(page, sim=0.3)
    assert other.encoded is None
    assert decode_lafc_plus(encode_lafc_plus(other)).sim == 0.3
