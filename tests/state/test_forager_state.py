"""The forager's and the reinforcing agent's rules (Palotai, Farkas & Lőrincz 2005), values
worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from frontierflow.state.forager import (
    ForagerPath,
    ForagerState,
    Variant,
    decode_forager,
    encode_forager,
)
from frontierflow.state.forager_agent import (
    AgentParams,
    Decision,
    DocumentVerdict,
    Fleet,
    decode_fleet,
    decode_verdict,
    encode_fleet,
    encode_verdict,
    judge,
    manage_forager,
    new_fleet,
    next_forager,
    score_send,
)
from frontierflow.state.foraging import (
    ForagerParams,
    add_reward,
    best_url,
    is_possibly_relevant,
    multiply,
    new_forager,
    rest_of_path_sums,
    select_next,
    split_weblog,
    start_list,
    td_step,
    visit,
    weblog_update,
)
from frontierflow.state.storage.codec import StateCodecError

H = 3_600_000
P2 = ForagerParams(dimensions=2, start_list=2, weblog_size=2, path_length=2)


def v(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float64)


def test_rest_of_path_sums_cumulate_in_reverse() -> None:
    # R_i = Σ_{j≥i} r_j: [1, 0, 2] → [3, 2, 2]
    assert rest_of_path_sums([1.0, 0.0, 2.0]) == [3.0, 2.0, 2.0]


def test_weblog_update_moves_known_urls_adds_new_sorts_truncates() -> None:
    # weblog a:2, b:1; path b, c, a with rewards 1, 0, 2 → R = 3, 2, 2
    # b: 1 + 0.3·(3 − 1) = 1.6; c (new): 2; a: 2 + 0.3·(2 − 2) = 2.0
    # sorted a 2.0, c 2.0 (tie: the weblog's a first), b 1.6; truncated to 2 entries
    weblog = (("a", 2.0), ("b", 1.0))
    updated = weblog_update(weblog, ["b", "c", "a"], [1.0, 0.0, 2.0], P2)
    assert updated == (("a", 2.0), ("c", 2.0))
    wide = ForagerParams(dimensions=2, start_list=2, weblog_size=3)
    full = weblog_update(weblog, ["b", "c", "a"], [1.0, 0.0, 2.0], wide)
    assert full[2][0] == "b" and full[2][1] == pytest.approx(1.6)
    assert start_list(full, wide) == ("a", "c")


def test_weblog_update_rejects_a_reward_per_step_mismatch() -> None:
    with pytest.raises(ValueError, match="rewards"):
        weblog_update((), ["a"], [], P2)


def test_td_step_by_hand() -> None:
    # w = (1, 0), x = (.5, .5), r = 1, x' = (1, −1), γ = .5, η = .1
    # δ = 1 + .5·1 − .5 = 1; w = (1, 0) + .1·1·(.5, .5) = (1.05, .05)
    params = ForagerParams(dimensions=2, start_list=1, discount=0.5, learning_rate=0.1)
    w, delta = td_step(v(1, 0), v(0.5, 0.5), 1.0, v(1, -1), params)
    assert delta == pytest.approx(1.0)
    assert w == pytest.approx(v(1.05, 0.05))
    # end of path: x' has value 0, so δ = 0 + 0 − .5 = −.5 and w = (.975, −.025)
    w, delta = td_step(v(1, 0), v(0.5, 0.5), 0.0, None, params)
    assert delta == pytest.approx(-0.5)
    assert w == pytest.approx(v(0.975, -0.025))


def test_best_url_is_the_largest_w_dot_x_first_on_ties() -> None:
    xs = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    assert best_url(v(0.2, 0.9), ("a", "b", "c"), xs) == 1  # .2, .9, .55
    assert best_url(v(1.0, 1.0), ("a", "b", "c"), xs) == 0  # 1, 1, 1: the first
    assert best_url(v(1.0, 1.0), (), np.zeros((0, 2))) is None


def test_possibly_relevant_within_24_hours_and_not_sent() -> None:
    p = ForagerParams()
    assert is_possibly_relevant(0, 24 * H, False, p)
    assert not is_possibly_relevant(0, 24 * H + 1, False, p)
    assert not is_possibly_relevant(0, H, True, p)
    assert not is_possibly_relevant(None, H, False, p)


def test_split_weblog_gives_two_equal_halves_in_order() -> None:
    weblog = tuple((u, float(10 - i)) for i, u in enumerate("abcde"))
    kept, given = split_weblog(weblog, seed=7, key="f", counter=3)
    assert len(kept) == 3 and len(given) == 2
    assert sorted(kept + given) == sorted(weblog)
    assert list(kept) == sorted(kept, key=lambda e: -e[1])
    assert split_weblog(weblog, 7, "f", 3) == (kept, given)  # repeatable
    assert split_weblog((("a", 1.0),), 7, "f", 3) == ((("a", 1.0),), (("a", 1.0),))


def test_multiplication_copies_weights_for_rl_and_draws_new_ones_for_wl() -> None:
    seeds = ["a", "b", "c", "d"]
    params = ForagerParams(dimensions=3, start_list=2, weblog_size=4)
    rl = new_forager(0, Variant.RL, seeds, 1, params)
    parent, child = multiply(rl, 5, 1, params)
    assert child.forager_id == 5 and np.array_equal(child.weights, rl.weights)
    assert len(parent.weblog) == 2 and len(child.weblog) == 2
    assert {u for u, _ in parent.weblog + child.weblog} == set(seeds)
    wl = new_forager(0, Variant.WL, seeds, 1, params)
    _, wl_child = multiply(wl, 5, 1, params)
    assert not np.array_equal(wl_child.weights, wl.weights)
    assert np.all(np.abs(wl_child.weights) <= 1.0)


def test_a_path_visits_learns_and_restarts() -> None:
    # 2-dim, path of 2 steps, start list of 2, γ = .5, η = .1
    params = ForagerParams(
        dimensions=2, start_list=2, weblog_size=3, path_length=2, discount=0.5, learning_rate=0.1
    )
    f = new_forager(0, Variant.WLRL, ["s", "t"], 3, params, weights=v(1, 0))
    f, first = select_next(f, 3, params)
    assert first in ("s", "t")
    f = visit(f, first, v(0.5, 0.5), [("p", v(1.0, 0.0)), ("q", v(0.0, 1.0))])
    f = add_reward(f, 1.0)
    f, second = select_next(f, 3, params)
    assert second == "p"  # w·x: p 1, q 0
    # TD: δ = 1 + .5·1 − .5 = 1 → w = (1.05, .05)
    assert f.weights == pytest.approx(v(1.05, 0.05))
    f = visit(f, "p", v(1.0, 0.0), [(first, v(0.5, 0.5))])  # visited: not a frontier entry
    assert f.path.frontier == ("q",)
    f = add_reward(f, 2.0)
    f, third = select_next(f, 3, params)  # 2 steps done: restart
    # terminal TD: δ = 2 + 0 − 1.05 = .95 → w = (1.05 + .095, .05)
    assert f.weights == pytest.approx(v(1.145, 0.05))
    # weblog: R = (3, 2); first: 0 + .3·(3 − 0) = .9 ; p (new): 2; the other seed: 0
    other = "t" if first == "s" else "s"
    assert f.weblog == (("p", 2.0), (first, pytest.approx(0.9)), (other, 0.0))
    assert third in ("p", first)
    assert f.path.visited == ()


def test_rl_forager_keeps_its_weblog_and_wl_its_weights() -> None:
    params = ForagerParams(dimensions=2, start_list=1, weblog_size=2, path_length=1)
    for variant in (Variant.RL, Variant.WL):
        f = new_forager(0, variant, ["s"], 3, params, weights=v(1, 0))
        f, url = select_next(f, 3, params)
        f = add_reward(visit(f, url, v(1.0, 1.0), []), 5.0)
        f, _ = select_next(f, 3, params)
        if variant is Variant.RL:
            assert f.weblog == (("s", 0.0),)
            assert not np.array_equal(f.weights, v(1, 0))
        else:
            assert f.weblog == (("s", 1.5),)  # s was in the weblog at 0: 0 + .3·5
            assert np.array_equal(f.weights, v(1, 0))


def test_forager_state_round_trips_and_rejects_bad_bytes() -> None:
    params = ForagerParams(dimensions=3, start_list=1)
    f = new_forager(4, Variant.WLRL, ["https://a/", "https://b/é"], 9, params)
    f, url = select_next(f, 9, params)
    f = add_reward(visit(f, url, v(0.1, 0.2, 0.3), [("https://c/", v(1, 2, 3))]), 0.5)
    back = decode_forager(encode_forager(f))
    assert back.weblog == f.weblog and back.path.visited == f.path.visited
    assert back.path.rewards == f.path.rewards and back.path.frontier == ("https://c/",)
    assert np.array_equal(back.path.frontier_x, f.path.frontier_x)
    assert np.array_equal(back.weights, f.weights) and back.draws == f.draws
    assert encode_forager(back) == encode_forager(f)
    with pytest.raises(StateCodecError):
        decode_forager(encode_forager(f)[:-1])
    with pytest.raises(StateCodecError):
        decode_forager(b"\x01" + encode_forager(f)[1:])
    bad = ForagerState(0, Variant.WL, v(1, 2), (), ForagerPath(frontier=("x",)))
    with pytest.raises(StateCodecError):
        encode_forager(bad)


# --- the reinforcing agent ----------------------------------------------------------------


def test_agent_rewards_only_the_first_fresh_on_topic_submitter() -> None:
    p = AgentParams()
    verdict, j = judge(None, 3, published_ms=0, now_ms=24 * H, on_topic=True, params=p)
    assert j.relevant and j.reinforcement == 1.0
    assert verdict == DocumentVerdict(24 * H, 3)
    again, j2 = judge(verdict, 4, 0, 24 * H, True, p)  # second submitter
    assert again == verdict and not j2.relevant and j2.reinforcement == -0.1
    _, old = judge(None, 3, 0, 24 * H + 1, True, p)  # older than 24 h
    assert not old.relevant
    none, off = judge(None, 3, 0, H, False, p)  # off topic: penalty, not remembered
    assert none is None and not off.relevant


def test_scores_multiply_and_delete_by_hand() -> None:
    p = AgentParams(initial_score=1.0, send_cost=0.1, relevant_gain=1.0, multiply_at=3.0)
    fleet = new_fleet(p)
    assert fleet.foragers == (0, 1) and fleet.scores == (1.0, 1.0)
    # three relevant sends: 1 + 3·(1 − .1) = 3.7 ≥ 3 → multiply into forager 2
    for _ in range(3):
        fleet = score_send(fleet, 0, True, p)
    assert fleet.score(0) == pytest.approx(3.7)
    fleet, decision, child = manage_forager(fleet, 0, p)
    assert decision is Decision.MULTIPLY and child == 2
    assert fleet.foragers == (0, 1, 2) and fleet.scores == (1.0, 1.0, 1.0)
    # eleven wasted sends: 1 − 1.1 = −.1 < 0 and 3 > 2 foragers → delete
    for _ in range(11):
        fleet = score_send(fleet, 1, False, p)
    fleet, decision, _ = manage_forager(fleet, 1, p)
    assert decision is Decision.DELETE and fleet.foragers == (0, 2)
    assert next_forager(fleet, 1) == 2  # the one that took the deleted one's turn
    assert next_forager(fleet, 2) == 0
    # at the minimum population nobody is deleted
    for _ in range(20):
        fleet = score_send(fleet, 2, False, p)
    assert manage_forager(fleet, 2, p)[1] is Decision.KEEP


def test_no_multiplication_past_the_maximum() -> None:
    p = AgentParams(max_population=2)
    fleet = Fleet((0, 1), (5.0, 1.0), 2)
    assert manage_forager(fleet, 0, p)[1] is Decision.KEEP


def test_agent_params_are_validated() -> None:
    with pytest.raises(ValueError, match="thresholds"):
        AgentParams(multiply_at=0.5)
    with pytest.raises(ValueError, match="populations"):
        AgentParams(min_population=3, max_population=2)


def test_agent_codecs_round_trip() -> None:
    verdict = DocumentVerdict(123456789, 7)
    assert decode_verdict(encode_verdict(verdict)) == verdict
    fleet = Fleet((0, 3), (1.5, -0.25), 4)
    assert decode_fleet(encode_fleet(fleet)) == fleet
    with pytest.raises(StateCodecError):
        decode_fleet(encode_fleet(fleet) + b"\x00")
    with pytest.raises(StateCodecError):
        decode_verdict(b"\x02" + encode_verdict(verdict)[1:])
