"""LAFC+ (pipelines/strategies/lafc_plus.py) on small webs worked out by hand: it uses its
budget where faithful LAFC's stack empties, credit along the path changes the next cycle's
order, and stale answers change nothing."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from topical_webs import Web

from frontierflow.pipelines.cli.common import lafc_plus_settings
from frontierflow.pipelines.core.strategy import CrawlClock, Reinforce
from frontierflow.pipelines.evaluation.simulator import simulate_cycles
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.pipelines.strategies.lafc_plus import (
    ECHO_ESTIMATE,
    ECHO_PATH,
    LafcPlus,
    LafcPlusSettings,
    read_path,
)
from frontierflow.schemas.records import ALREADY_FETCHED, REPLY_ECHO, FetchEvent, FrontierEntry
from frontierflow.state.lafc_plus import UNKNOWN, LafcPlusParams, LafcPlusState
from frontierflow.state.relevance import Topic

TOPIC = Topic.parse("net")
ON = {"net": 1}  # similarity 1
OFF = {"zzz": 1}  # similarity 0


def _plus(**params: float) -> LafcPlus:
    """LAFC+ with `params`; without the depth bonus (shallow = 0) unless given, as the small
    webs below are worked out for the other rules."""
    params.setdefault("shallow", 0.0)
    return LafcPlus(TOPIC, LafcPlusSettings(LafcPlusParams(**params)))


def _orders(web: Web, strategy: object, budget: int, cycles: int) -> list[list[int]]:
    result = simulate_cycles(web, strategy, [0], budget, cycles)
    return [c.downloaded.tolist() for c in result]


def test_the_budget_is_used_where_lafcs_stack_empties() -> None:
    # a chain 0 → 1 → 2 → 3 → 4 with nothing on topic. LAFC (C = 0.5): the seed is pushed,
    # tries 1 (off topic, not pushed), has no link left and is popped: 2 downloads. LAFC+
    # keeps every fetched page's choice in the frontier: all 5 pages.
    web = Web([[1], [2], [3], [4], []], [OFF] * 5)
    assert _orders(web, Lafc(TOPIC, LafcSettings(control_threshold=0.5)), 10, 1) == [[0, 1]]
    assert _orders(web, _plus(), 10, 1) == [[0, 1, 2, 3, 4]]


def test_credit_along_the_path_reorders_the_next_cycle() -> None:
    # 0 → 2, 1 (in that order); 1 → 3; 2 → 4. Only 3 is on topic. explore = 0.
    # Cycle 1: the seed's untried links are worth its own similarity 0: a tie, so 2 (first
    # in page order). 2's fetch emits its choice 4 (estimate 0), then its answer to 0 (reward
    # 0) makes 0 choose 1 (H = 0): 4 entered the frontier first, so 0, 2, 4, 1, then 3.
    # 3's fetch (path 1, 0) rewards 1's action 3 with 1 and credits 0's action 1 with
    # γ·1 = 0.5. Cycle 2: the seed chooses 1 (0.5 > 0), 1 chooses 3 (1.0), then 2, then 4.
    # Without credit (depth 1) both of the seed's links are worth 0 and cycle 1 repeats.
    web = Web([[2, 1], [3], [4], [], []], [OFF, OFF, OFF, ON, OFF])
    assert _orders(web, _plus(explore=0.0, gamma=0.5), 10, 2) == [
        [0, 2, 4, 1, 3],
        [0, 1, 3, 2, 4],
    ]
    assert _orders(web, _plus(explore=0.0, depth=1), 10, 2) == [[0, 2, 4, 1, 3]] * 2


def test_a_link_answered_already_fetched_is_asked_last_in_the_next_cycle() -> None:
    # 0 → 1, 2; 1 → 3; 2 → 3, 4; nothing on topic, explore = 0: every estimate is 0 and the
    # frontier serves in first-seen order. Cycle 1: 0, 1 (offers 3 before 0 offers 2), 3, 2;
    # 2 asks for 3 first (page order): status 208, then 4. Cycle 2 with the same budget of
    # 5: 2 asks for 4 first, because 3 is marked SEEN, and the budget ends before it asks
    # for 3; the first LAFC+ (skip_seen = 0) asks for 3 first again and is answered 208.
    web = Web([[1, 2], [3], [3, 4], [], []], [OFF] * 5)
    for skip, answers in ((1, [1, 0]), (0, [1, 1])):
        crawls = simulate_cycles(web, _plus(explore=0.0, skip_seen=skip), [0], 5, 2)
        assert [c.downloaded.tolist() for c in crawls] == [[0, 1, 3, 2, 4]] * 2
        assert [c.answered for c in crawls] == answers


def test_optimism_serves_untried_links_of_unlearned_pages_first() -> None:
    # 0 → 1, 2; 1 → 3, 4, 5; 2 → 6. Only 6 is on topic. explore c = 0.5, so an untried link
    # is worth H + 0.5/√(1 + n). The seed (H = 0, n = 0) offers 1 at 0.5. 1's fetch offers its
    # first link 3 at 0.5; its answer (reward 0) gives the seed n = 1: 2 at 0.5/√2 = 0.354.
    # 3 (0.5) goes first; its answer gives 1 n = 1: 4 at 0.354, behind 2 (same estimate,
    # in the frontier earlier). 2's fetch offers 6 at 0.5, served next; then 4, whose answer
    # gives 1 n = 2: 5 at 0.5/√3.
    web = Web([[1, 2], [3, 4, 5], [6], [], [], [], []], [OFF] * 6 + [ON])
    assert _orders(web, _plus(explore=0.5), 10, 1) == [[0, 1, 3, 2, 6, 4, 5]]


def test_the_depth_bonus_sends_the_crawl_back_to_a_seeds_untried_links() -> None:
    # 0 → 1, 2; 1 → 3; 2 → 5; 3 → 4. On topic (similarity 1): 1, 3 and 5. explore = 0.
    # Without the bonus: the seed (worth 0) offers 1 at 0; 1's fetch offers 3 at its worth
    # 1.0, then its answer (reward 1, H = 1) makes the seed offer 2 at 1.0, entered after 3:
    # 0, 1, 3, 2. With shallow = 0.3: the seed (h = 0) offers 1 at 0 + 0.3; 1 (h = 1) offers
    # 3 at 1.0 + 0.15 = 1.15, and the seed then offers 2 at 1.0 + 0.3 = 1.3, served first:
    # 0, 1, 2, 3 (2, worth 0 at h = 1, offers 5 at 0.15, behind 3).
    web = Web([[1, 2], [3], [5], [4], [], []], [OFF, ON, OFF, ON, OFF, ON])
    assert _orders(web, _plus(explore=0.0), 4, 1) == [[0, 1, 3, 2]]
    assert _orders(web, _plus(explore=0.0, shallow=0.3, shallow_gap=0), 4, 1) == [[0, 1, 2, 3]]
    # with the gap (the default) the bonus is times 1 − H: the seed's 2 at 1.0 + 0.3·0 = 1.0
    # and 1's 3 at 1.0 + 0.15·0 = 1.0 tie, and 3 entered first: 0, 1, 3, 2 again
    assert _orders(web, _plus(explore=0.0, shallow=0.3), 4, 1) == [[0, 1, 3, 2]]


def test_a_known_link_collected_again_does_not_raise_what_untried_ones_are_worth() -> None:
    # 0 → 1, 2, 3, 4 on the topic "net tcp": 1 is worth 1, 3 (net only) 1/√2 ≈ 0.707, 2 and
    # 4 nothing. explore = 0, no depth bonus, a = 0.5, budget 4. Cycle 1, all untried: 1
    # (H: the seed's worth 0) earns 1 (H = 1), 2 earns 0 (H = 0.5), 3 earns 0.707
    # (H = 0.604); the budget ends before 4. Cycle 2: the seed chooses its known 1 (1.0)
    # first. Taking that reward into H (harvest_untried = 0) gives H = 0.802, so the untried
    # 4 comes before the known 3 (0.707); with H kept to the answers of untried links it
    # stays 0.604 and 3 comes first.
    topic = Topic.parse("net tcp")
    web = Web([[1, 2, 3, 4], [], [], [], []], [OFF, {"net": 1, "tcp": 1}, OFF, {"net": 1}, OFF])

    def orders(untried_only: int) -> list[list[int]]:
        params = LafcPlusParams(explore=0.0, shallow=0.0, harvest_untried=untried_only)
        return _orders(web, LafcPlus(topic, LafcPlusSettings(params)), 4, 2)

    assert orders(1) == [[0, 1, 2, 3], [0, 1, 3, 4]]
    assert orders(0) == [[0, 1, 2, 3], [0, 1, 4, 3]]


def test_an_answer_learns_then_chooses_the_next_link_with_the_path_in_the_echo() -> None:
    plus = _plus(explore=0.0)
    key = "https://w.invalid/0"
    one, two = "https://w.invalid/1", "https://w.invalid/2"
    state = LafcPlusState((one, two), [UNKNOWN, UNKNOWN], [True, True], 0.4, 0.0, 0, 0, 0, ("g",))
    answer = Reinforce(key, one, "c", 0, 0.9)
    new, change = plus.apply(key, state, answer, CrawlClock(3, 9))
    # one answer: its estimate 0.9, H = 0.9 (n = 1), action 0 disabled; the only untried link
    # is worth H = 0.9
    assert new.values == [0.9, UNKNOWN] and new.enabled == [False, True]
    assert (new.future, new.answers, new.pending) == (0.9, 1, 1)
    assert isinstance(change, FrontierEntry)
    assert (change.url, change.priority, change.via, change.emitted_at) == (two, 0.9, key, 9)
    assert change.echo == {ECHO_ESTIMATE: "0.9", REPLY_ECHO: "1", ECHO_PATH: f"{key}\ng"}
    assert state.pending == 0  # the input state is not mutated


def test_stale_or_foreign_answers_change_nothing_and_credits_only_raise() -> None:
    plus = _plus()
    key = "https://w.invalid/0"
    one, two = "https://w.invalid/1", "https://w.invalid/2"
    state = LafcPlusState((one, two), [0.2, UNKNOWN], [True, True], 0.4, 0.0, 0, 1, 0)
    clock = CrawlClock(3, 9)
    for stale in (
        Reinforce(key, two, "c", 1, 1.0),  # not the pending action
        Reinforce(key, one, "c", 0, 1.0),  # another cycle
    ):
        assert plus.apply(key, state, stale, clock) == (state, None)
    assert plus.apply(key, None, Reinforce(key, one, "c", 1, 1.0), clock) == (None, None)
    credit = Reinforce(key, two, "c", 1, 0.25, credit=True)
    raised, change = plus.apply(key, state, credit, clock)
    assert change is None and raised.values == [0.2, 0.25] and raised.pending == 0
    lower = Reinforce(key, one, "c", 1, 0.1, credit=True)
    assert plus.apply(key, state, lower, clock) == (state, None)


def test_route_sends_the_answer_and_credits_up_the_echoed_path() -> None:
    plus = _plus(gamma=0.5, depth=3)
    event = FetchEvent(
        url="https://w.invalid/c",
        fetched_at=5,
        status=200,
        fetcher_id="f",
        host="w.invalid",
        via="https://w.invalid/p",
        crawl_id="c",
        cycle=2,
        outlinks=("https://w.invalid/c", "https://w.invalid/x", "https://w.invalid/x"),
        terms={"net": 1},
        echo={ECHO_ESTIMATE: "0.5", ECHO_PATH: "https://w.invalid/p\nG\nGG"},
    )
    routed = plus.route(event)
    assert routed.fetched.outlinks == ("https://w.invalid/x",)  # itself and repeats left out
    assert routed.fetched.value == 1.0 and routed.fetched.path == ("https://w.invalid/p", "G", "GG")
    assert routed.reinforce == Reinforce("https://w.invalid/p", event.url, "c", 2, 1.0)
    assert [(m.parent, m.child, m.value, m.credit) for m in routed.credits] == [
        ("G", "https://w.invalid/p", 0.5, True),
        ("GG", "G", 0.25, True),
    ]
    keys = [key for key, _ in routed.messages()]
    assert keys == [event.url, "https://w.invalid/p", "G", "GG"]
    # a seed's fetch (no estimate in the echo) answers nobody
    seed = plus.route(dataclasses.replace(event, via=None, echo={}))
    assert seed.reinforce is None and seed.credits == () and seed.fetched.path == ()


def test_a_repeats_answer_is_the_routed_one_without_routing_the_page() -> None:
    # a 208 answer (a repeat: the engine sends only its Reinforce) and a download, with and
    # without the echo of a LAFC+ choice: `repeat_reinforce` is `route(...).reinforce`
    plus = _plus()
    answer = FetchEvent(
        url="https://w.invalid/c",
        fetched_at=5,
        status=ALREADY_FETCHED,
        fetcher_id="f",
        host="w.invalid",
        via="https://w.invalid/p",
        crawl_id="c",
        cycle=1,
        echo={ECHO_ESTIMATE: "0.5", ECHO_PATH: "https://w.invalid/p\nG", REPLY_ECHO: "1"},
    )
    page = dataclasses.replace(
        answer, status=200, outlinks=("https://w.invalid/x",), terms={"net": 1, "zzz": 1}
    )
    for event in (answer, page):
        for changed in ({}, {"via": None}, {"echo": {}}):
            ev = dataclasses.replace(event, **changed)  # type: ignore[arg-type]
            assert plus.repeat_reinforce(ev) == plus.route(ev).reinforce
    assert plus.repeat_reinforce(answer) == Reinforce(
        "https://w.invalid/p", answer.url, "c", 1, 0.0
    )


def test_read_path_trusts_only_a_path_that_starts_at_via() -> None:
    assert read_path("p\nq\nr\ns", "p", 3) == ("p", "q", "r")
    assert read_path("x\nq", "p", 3) == ("p",)
    assert read_path("", "p", 3) == ("p",)
    assert read_path("p\n\nq", "p", 3) == ("p",)  # an empty page name: not trusted
    assert read_path("p\nq\n", "p", 2) == ("p", "q")  # past the depth: not read


def test_an_edited_path_in_the_echo_is_neither_fatal_nor_credited() -> None:
    plus = _plus()
    event = FetchEvent(
        url="https://w.invalid/c",
        fetched_at=5,
        status=200,
        fetcher_id="f",
        host="w.invalid",
        via="https://w.invalid/p",
        crawl_id="c",
        outlinks=(),
        terms={"net": 1},
        echo={ECHO_ESTIMATE: "0.5", ECHO_PATH: "https://w.invalid/p\n\nx"},
    )
    routed = plus.route(event)
    assert routed.fetched.path == ("https://w.invalid/p",) and routed.credits == ()
    state, _ = plus.apply(event.url, None, routed.fetched, CrawlClock(1, 5))
    assert plus.decode_state(plus.encode_state(state)) == state


def test_settings_from_the_command_line() -> None:
    import argparse

    args = argparse.Namespace(lafc_plus="explore=0.3, depth=2")
    params = lafc_plus_settings(args).params
    assert (params.explore, params.depth, params.rate) == (0.3, 2, LafcPlusParams().rate)
    # the first LAFC+ stays reachable
    first = lafc_plus_settings(
        argparse.Namespace(lafc_plus="gamma=0.5,depth=3,shallow=0,skip_seen=0")
    ).params
    assert (first.gamma, first.depth, first.shallow, first.skip_seen) == (0.5, 3, 0.0, 0)
    assert (LafcPlusParams().gamma, LafcPlusParams().shallow) == (1.0, 0.3)
    with pytest.raises(ValueError, match="skip_seen"):
        lafc_plus_settings(argparse.Namespace(lafc_plus="skip_seen=2"))
    with pytest.raises(ValueError, match="NAME=VALUE"):
        lafc_plus_settings(argparse.Namespace(lafc_plus="speed=3"))
    with pytest.raises(ValueError, match="needs a topic"):
        build_strategy("lafc-plus", budget=10)
    assert isinstance(build_strategy("lafc-plus", budget=10, topic=TOPIC), LafcPlus)


def test_apply_never_changes_a_state_in_place() -> None:
    # LAFC+ declares immutable states, so the engine keeps decoded states across steps: every
    # state `apply` is given must be unchanged after it, over a crawl with rewards, credits
    # and 208 answers (the web of the credit test: 2 cycles, 10 applies at least)
    plus = _plus(explore=0.0, gamma=0.5)
    assert plus.immutable_states
    seen: list[tuple[LafcPlusState, LafcPlusState]] = []
    apply = plus.apply

    def checked_apply(key, state, message, clock):  # type: ignore[no-untyped-def]
        before = copy.deepcopy(state)
        result = apply(key, state, message, clock)
        if state is not None:
            seen.append((before, state))
        return result

    plus.apply = checked_apply  # type: ignore[method-assign]
    web = Web([[2, 1], [3], [4], [], [0]], [OFF, OFF, OFF, ON, OFF])
    simulate_cycles(web, plus, [0], 10, 2)
    assert len(seen) >= 10
    assert all(before == after for before, after in seen)
