"""The fleet's streaming transitions (state/fleet.py), worked by hand on a three-page site.

Constants small enough to follow: 2-dimensional x, paths of 2 steps, time slices of
100 ms, a reward of 1 and a penalty of −0.1, a send costs 0.05 of score and a relevant
document pays 1. WL foragers, so the weights never move and the choice w·x can be read off
the forager's own (random) weights."""

from __future__ import annotations

import numpy as np
import pytest

from frontierflow.state.fleet import (
    Download,
    FleetParams,
    FleetState,
    Request,
    Role,
    decode_fleet_state,
    encode_fleet_state,
    observe,
    seed_fleet,
)
from frontierflow.state.forager import Variant
from frontierflow.state.forager_agent import AgentParams
from frontierflow.state.foraging import ForagerParams
from frontierflow.state.storage.codec import StateCodecError

A_X = np.array([1.0, 0.0])
B_X = np.array([0.0, 1.0])
NO_X = np.zeros(2)


def params(multiply_at: float = 3.0, max_age_ms: int = 24 * 3_600_000) -> FleetParams:
    forager = ForagerParams(
        dimensions=2, start_list=2, weblog_size=4, path_length=2, max_age_ms=max_age_ms
    )
    agent = AgentParams(
        reward=1.0,
        penalty=-0.1,
        send_cost=0.05,
        relevant_gain=1.0,
        multiply_at=multiply_at,
        time_slice_ms=100,
        max_age_ms=max_age_ms,
    )
    return FleetParams(Variant.WL, seed=7, forager=forager, agent=agent)


def roundtrip(state: FleetState) -> FleetState:
    raw = encode_fleet_state(state)
    again = decode_fleet_state(raw)
    assert encode_fleet_state(again) == raw
    return again


def first_step(p: FleetParams) -> tuple[FleetState, list[Request]]:
    """Seed h; h links to a, b and itself; a is a fresh story on topic, b a hub."""
    state, requests, withdrawn = seed_fleet(None, "h", 0, p)
    assert withdrawn is None
    assert requests == [Request("h", None, 1, 0, Role.VISIT)]
    assert state.fleet.foragers == (0, 1) and state.slice_end_ms == 100
    state, requests, _ = observe(state, 1, Download("h", NO_X, None, False, ("a", "b", "h")), 10, p)
    assert requests == [Request("a", "h", 1, 0, Role.PROBE), Request("b", "h", 1, 0, Role.PROBE)]
    state, requests, _ = observe(roundtrip(state), 1, Download("a", A_X, 5, True), 20, p)
    assert requests == []
    return roundtrip(state), requests


def test_a_step_visits_probes_sends_and_chooses_by_w_dot_x() -> None:
    p = params()
    state, _ = first_step(p)
    w = state.foragers[0].weights
    state, requests, _ = observe(state, 1, Download("b", B_X, None, False), 30, p)
    # h (no publication time) and b (a hub) are never sent; a is fresh (25 ms old), on topic,
    # new to the agent: reward 1; forager 0's score 1 − 0.05 + 1 = 1.95
    assert (state.counters.downloads, state.counters.sent, state.counters.relevant) == (3, 1, 1)
    assert state.fleet.scores == pytest.approx((1.95, 1.0))
    assert state.foragers[0].path.visited == ("h",)
    assert state.foragers[0].path.rewards == (1.0,)
    assert state.sent[0] == {"a": 30} and state.verdicts["a"].forager_id == 0
    # 30 ms < the slice's end (100): forager 0 goes on, to the frontier URL with larger w·x
    chosen = "a" if w[0] >= w[1] else "b"
    assert requests == [Request(chosen, "h", 2, 0, Role.VISIT)]
    roundtrip(state)


def test_slice_end_hands_on_and_only_the_first_submitter_is_rewarded() -> None:
    p = params()
    state, _ = first_step(p)
    state, [visit], _ = observe(state, 1, Download("b", B_X, None, False), 30, p)
    # step 2: the chosen page has no links, so the step closes at once, at 110 ≥ 100:
    # forager 0's path is full (2 steps), the agent keeps it (1.95 < 3), forager 1's turn
    state, requests, _ = observe(state, 2, Download(visit.url, NO_X, None, False), 110, p)
    assert state.fleet.foragers == (0, 1) and state.slice_end_ms == 210
    assert requests == [Request("h", None, 3, 1, Role.VISIT)]  # start list: h only
    state, requests, _ = observe(state, 3, Download("h", NO_X, None, False, ("a",)), 120, p)
    assert requests == [Request("a", "h", 3, 1, Role.PROBE)]
    state, _, _ = observe(state, 3, Download("a", A_X, 5, True), 130, p)
    # forager 1 sends a too: the agent rewarded forager 0 for it, so a penalty (−0.1),
    # and forager 1's score is 1 − 0.05
    assert (state.counters.sent, state.counters.relevant) == (2, 1)
    assert state.fleet.scores == pytest.approx((1.95, 0.95))
    assert state.foragers[1].path.rewards == (-0.1,)


def test_answers_no_request_waits_for_are_counted_and_ignored() -> None:
    p = params()
    state, _ = first_step(p)
    before = encode_fleet_state(state)
    for step, download in (
        (9, Download("b", B_X, None, False)),  # another step's
        (1, Download("a", A_X, 5, True)),  # a duplicate answer
        (1, Download("z", A_X, 5, True)),  # never asked for
    ):
        state, requests, _ = observe(state, step, download, 40, p)
        assert requests == []
    assert state.counters.stale == 3
    state.counters.stale = 0
    assert encode_fleet_state(state) == before


def test_multiplication_at_the_upper_threshold() -> None:
    p = params(multiply_at=1.9)
    state, _ = first_step(p)
    state, [visit], _ = observe(state, 1, Download("b", B_X, None, False), 30, p)
    state, requests, _ = observe(state, 2, Download(visit.url, NO_X, None, False), 110, p)
    # 1.95 ≥ 1.9: forager 0 multiplies; child 2 joins the turn order, both scores reset
    assert state.fleet.foragers == (0, 1, 2) and state.fleet.next_id == 3
    assert state.fleet.scores == pytest.approx((1.0, 1.0, 1.0))
    assert state.sent[2] == {}
    assert requests[0].forager_id == 1


def test_later_seeds_restart_the_unanswered_first_step_and_join_weblogs() -> None:
    p = params()
    state, _, _ = seed_fleet(None, "h", 0, p)
    state, requests, withdrawn = seed_fleet(state, "s", 0, p)
    assert [u for u, _ in state.foragers[1].weblog] == ["h", "s"]
    assert requests[0].step == 1 and requests[0].role is Role.VISIT
    assert withdrawn == ("h" if requests[0].url == "s" else None)
    again, requests, _ = seed_fleet(state, "s", 0, p)
    assert requests == [] and encode_fleet_state(again) == encode_fleet_state(state)
    # once the first step is answered, a seed only joins the weblogs
    state, _, _ = observe(state, 1, Download(state.step.chosen, NO_X, None, False, ("x",)), 5, p)
    state, requests, withdrawn = seed_fleet(state, "t", 6, p)
    assert requests == [] and withdrawn is None
    assert [u for u, _ in state.foragers[0].weblog] == ["h", "s", "t"]


def test_the_agents_memory_is_pruned_after_max_age() -> None:
    p = params(max_age_ms=50)
    state, _ = first_step(p)
    state, [visit], _ = observe(state, 1, Download("b", B_X, None, False), 30, p)
    assert set(state.verdicts) == {"a"}
    state, _, _ = observe(state, 2, Download(visit.url, NO_X, None, False), 110, p)
    # at 110 the verdict of 30 is 80 ms old > 50: a is too old to be relevant again
    assert state.verdicts == {} and state.sent == {0: {}, 1: {}}


def test_malformed_fleet_state_is_a_codec_error() -> None:
    state, _ = first_step(params())
    raw = encode_fleet_state(state)
    for bad in (raw[:-1], raw + b"\0", b"\x02" + raw[1:], b""):
        with pytest.raises(StateCodecError):
            decode_fleet_state(bad)
