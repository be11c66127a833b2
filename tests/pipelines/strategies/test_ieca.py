"""IECA's equations (Golshani & ZarehBidoki 2012) with values worked out by hand, and the
operator on a walk."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontierflow.connectors.base import Position, Sink
from frontierflow.pipelines.core.step import LatestChanges, apply_messages, keep_latest
from frontierflow.pipelines.core.strategy import (
    CrawlClock,
    Fetched,
    Link,
    Message,
    Reinforce,
    Seed,
    Strategy,
)
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.strategies.ieca import ECHO_DISTANCE, IecaStrategy
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    Removal,
)
from frontierflow.state.ieca import (
    UNKNOWN,
    IecaDistance,
    IecaParams,
    alpha,
    clock_coefficients,
    decode_ieca,
    delta_t,
    encode_ieca,
    encode_ieca_many,
    link_weight,
    new_distance,
    pc_coefficient,
    structure_term,
    updated_distance,
)
from frontierflow.state.storage.codec import StateCodecError
from frontierflow.state.storage.memory import InMemoryStore

LOG2 = math.log10(2)
LOG3 = math.log10(3)
P = IecaParams(budget=1000, k=25)


def test_fig1_example_v_is_closer_than_t() -> None:
    # Fig. 1: p has 2 links, q (child of p) has 3, s (child of p) has 2 in the text's
    # second path: d_pt = log 2 + log 3, d_pv = log 2 + log 2. With δ = 0 and d_p = 0,
    # eq. 13 is the plain sum of link weights (eq. 2).
    d_q = new_distance(0.0, link_weight(2), delta=0.0)
    d_t = new_distance(d_q, link_weight(3), delta=0.0)
    d_v = new_distance(d_q, link_weight(2), delta=0.0)
    assert d_t == pytest.approx(LOG2 + LOG3)
    assert d_v == pytest.approx(LOG2 + LOG2)
    assert d_v < d_t


def test_link_weight_is_log10_outdegree() -> None:
    assert link_weight(1) == 0.0
    assert link_weight(10) == pytest.approx(1.0)
    assert link_weight(0) == 0.0  # no links: nothing is ever weighted by it


def test_eq13_new_page() -> None:
    # (1 − 0.35)·0.3 + log10 2 = 0.195 + 0.30103
    assert new_distance(0.3, LOG2, 0.35) == pytest.approx(0.195 + 0.3010299957)


def test_eq10_alpha_one() -> None:
    # d_j = 0.8, d_i = 0.4, O(i) = 10, δ = 0.35, α = 1:
    # learned = 1·(1 + 0.65·0.4) = 1.26; 0.65·1.26 = 0.819; f = 2; 0.35·log10 2 = 0.10536
    assert updated_distance(0.8, 0.4, 1.0, 0.35, 1.0) == pytest.approx(0.819 - 0.35 * LOG2)


def test_eq10_alpha_decayed() -> None:
    a = math.exp(-0.1)
    learned = (1 - a) * 0.8 + a * 1.26
    expected = 0.65 * learned - 0.35 * LOG2
    assert updated_distance(0.8, 0.4, 1.0, 0.35, a) == pytest.approx(expected)
    assert expected == pytest.approx(0.6851856, abs=1e-6)


@pytest.mark.parametrize(
    ("d_child", "d_parent", "f"),
    [
        (0.8, 0.4, 2.0),  # same sign: d_j / d_i
        (-0.8, -0.4, 2.0),  # both negative: same sign
        (0.5, -0.4, 2.25),  # signs differ: (d_j − d_i) / |d_i| = 0.9 / 0.4
        (-0.5, 0.4, -2.25),  # signs differ: (−0.9) / 0.4
        (0.0, 0.4, 0.0),  # zero counts as non-negative: 0 / 0.4
    ],
)
def test_eq8_pc_coefficient(d_child: float, d_parent: float, f: float) -> None:
    assert pc_coefficient(d_child, d_parent) == pytest.approx(f)


@pytest.mark.parametrize(
    ("d_child", "d_parent", "term"),
    [
        (0.8, 0.4, LOG2),
        (0.5, -0.4, math.log10(2.25)),
        (-0.5, 0.4, 0.0),  # f < 0: log undefined → guard gives 0
        (0.0, 0.4, 0.0),  # f = 0: log undefined → 0
        (0.7, 0.0, 0.0),  # d_i = 0: f undefined → 0
    ],
)
def test_structure_term_guards(d_child: float, d_parent: float, term: float) -> None:
    assert structure_term(d_child, d_parent) == pytest.approx(term)


def test_eq10_with_guard_keeps_learned_part_only() -> None:
    # d_i = 0: the structure term is 0, so d = 0.65·(1·(log10 10 + 0)) = 0.65
    assert updated_distance(0.7, 0.0, 1.0, 0.35, 1.0) == pytest.approx(0.65)


def test_eq12_delta_steps_every_k_pages() -> None:
    assert delta_t(0, P) == pytest.approx(0.35)
    assert delta_t(24, P) == pytest.approx(0.35)  # not updated before size % k == 0
    assert delta_t(25, P) == pytest.approx(0.35 - 0.28 * 0.025)
    assert delta_t(999, P) == pytest.approx(0.35 - 0.28 * 0.975)
    assert delta_t(1000, P) == pytest.approx(0.07)
    assert delta_t(5000, P) == pytest.approx(0.07)  # past the budget: held at the end value


def test_eq5_alpha() -> None:
    assert alpha(24, P) == 1.0
    assert alpha(25, P) == pytest.approx(math.exp(-0.1))
    assert alpha(50, P) == pytest.approx(math.exp(-0.2))


def test_params_scale_k_with_budget_and_refuse_nonsense() -> None:
    assert IecaParams.for_budget(10_000_000).k == 250_000  # the paper's k
    assert IecaParams.for_budget(100_000).k == 2_500
    with pytest.raises(ValueError, match="budget and k"):
        IecaParams(budget=0)
    with pytest.raises(ValueError, match="delta_t"):
        IecaParams(delta_start=0.2, delta_slope=0.28)


def test_state_encoding_round_trip() -> None:
    for state in (IecaDistance(), IecaDistance(0.49, 3), IecaDistance(-1.5, -1)):
        assert decode_ieca(encode_ieca(state)) == state
    assert len(encode_ieca(IecaDistance())) == 12


def test_many_states_encode_as_each_alone() -> None:
    states = [IecaDistance(), IecaDistance(0.49, 3), IecaDistance(-1.5, -1)]
    assert encode_ieca_many(states) == [encode_ieca(s) for s in states]
    assert list(IecaStrategy(P).encode_states(states)) == [encode_ieca(s) for s in states]
    assert encode_ieca_many([]) == []
    # a cycle past int32 cannot be packed: the error names that state, as encode_ieca does
    with pytest.raises(StateCodecError, match=r"cannot encode.*2147483648"):
        encode_ieca_many([IecaDistance(0.5, 1), IecaDistance(0.5, 2**31)])


def test_operator_skips_pages_crawled_this_cycle() -> None:
    strategy = IecaStrategy(P)
    crawled = IecaDistance(0.4, 0)
    link = Link("https://b/", "https://a/", "c", 0, 0.3, LOG2)
    state, change = strategy.apply("https://b/", crawled, link, CrawlClock(1, 0))
    assert state == crawled and change is None
    # the same page in the next cycle is known and not crawled: eq. 10 applies
    link1 = Link("https://b/", "https://a/", "c", 1, 0.3, LOG2)
    state, change = strategy.apply("https://b/", crawled, link1, CrawlClock(1, 0))
    assert state is not None and state.distance == pytest.approx(
        updated_distance(0.4, 0.3, LOG2, 0.35, 1.0)
    )
    assert isinstance(change, FrontierEntry) and change.priority == -state.distance


def _event(url: str, outlinks: tuple[str, ...], echo: dict[str, str], at: int) -> FetchEvent:
    return FetchEvent(
        url=url,
        fetched_at=at,
        status=200,
        fetcher_id="f",
        host="h",
        crawl_id="c",
        outlinks=outlinks,
        echo=echo,
    )


class _Collect(Sink):
    def __init__(self) -> None:
        self.changes: list[object] = []

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        self.changes.extend(changes)

    def flush(self) -> bytes:
        return b""

    def rewind(self, position: bytes | None) -> None:
        return None


def test_walk_through_the_engine() -> None:
    """Seed A; fetch A → {B, C}; fetch B → {C}. Values by hand with δ = 0.35, α = 1."""
    strategy = IecaStrategy(P)
    sink = _Collect()
    engine = Engine(strategy, InMemoryStore(Engine.families_for(strategy)), sink)
    a, b, c = "https://a.example/", "https://b.example/", "https://c.example/"
    engine.seed([a], crawl_id="c")
    seed_entry = sink.changes[-1]
    assert isinstance(seed_entry, FrontierEntry) and seed_entry.priority == -0.3

    engine.run_step([(Position(None, 0), _event(a, (b, c), seed_entry.echo, 1), b"")])
    by_url = {ch.url: ch for ch in sink.changes[1:]}
    assert isinstance(by_url[a], Removal)
    d_b = 0.65 * 0.3 + LOG2  # eq. 13: 0.49603
    entry_b = by_url[b]
    assert isinstance(entry_b, FrontierEntry)
    assert entry_b.priority == pytest.approx(-d_b)
    assert float(entry_b.echo[ECHO_DISTANCE]) == pytest.approx(d_b)

    engine.run_step([(Position(None, 1), _event(b, (c,), entry_b.echo, 2), b"")])
    # eq. 10 for C (known, d = d_b) from B (d_i = d_b, O = 1 → weight 0), 2 pages crawled:
    # learned = 1·(0 + 0.65·d_b); 0.65·learned; f = d_b / d_b = 1 → log 0.
    entry_c = sink.changes[-1]
    assert isinstance(entry_c, FrontierEntry) and entry_c.url == c
    assert entry_c.priority == pytest.approx(-(0.65 * 0.65 * d_b))
    assert engine.crawled("c") == 2


def test_duplicate_fetch_in_same_cycle_is_ignored() -> None:
    strategy = IecaStrategy(P)
    sink = _Collect()
    engine = Engine(strategy, InMemoryStore(Engine.families_for(strategy)), sink)
    a, b = "https://a.example/", "https://b.example/"
    event = _event(a, (b,), {}, 1)
    engine.run_step([(Position(None, 0), event, b""), (Position(None, 1), event, b"")])
    assert engine.crawled("c") == 1
    assert engine.stats.duplicates == 1
    assert [type(ch) for ch in sink.changes] == [Removal, FrontierEntry]


def test_seed_state_and_unknown_distance() -> None:
    strategy = IecaStrategy(P)
    state, change = strategy.apply("https://s/", None, Seed("https://s/", "c", 0), CrawlClock(0, 0))
    assert state == IecaDistance(0.3, -1)
    assert isinstance(change, FrontierEntry) and change.via is None
    assert IecaDistance().distance == UNKNOWN


_URL = "https://a.org/x"
_MESSAGES = st.one_of(
    st.builds(
        lambda parent, cycle, d, w: Link(_URL, parent, "c", cycle, d, w),
        st.sampled_from(["https://p.org/1", "https://p.org/2"]),
        st.integers(0, 2),
        st.floats(-3, 3, allow_nan=False),
        st.floats(0, 3, allow_nan=False),
    ),
    st.builds(lambda cycle: Fetched(_URL, "c", cycle, ()), st.integers(0, 2)),
    st.builds(lambda cycle: Seed(_URL, "c", cycle), st.integers(0, 2)),
    st.builds(lambda cycle: Reinforce(_URL, "https://q.org/", "c", cycle), st.integers(0, 2)),
)
_CLOCKED = st.lists(
    st.tuples(st.builds(CrawlClock, st.integers(0, 30), st.integers(0, 10**6)), _MESSAGES),
    max_size=12,
)
_STATES = st.one_of(
    st.none(),
    st.builds(
        IecaDistance, st.floats(-3, 3, allow_nan=False) | st.just(UNKNOWN), st.integers(-1, 2)
    ),
)


@settings(max_examples=300)
@given(_STATES, _CLOCKED)
def test_batch_equals_the_message_by_message_fold(
    state: IecaDistance | None, messages: list[tuple[CrawlClock, Message]]
) -> None:
    """IECA's own batch fold builds only the last entry; after `keep_latest` it must equal
    the base class's fold of `apply`, state and changes alike."""
    strategy = IecaStrategy(IecaParams(budget=40, k=10))
    fast_latest: LatestChanges = {}
    slow_latest: LatestChanges = {}
    fast = apply_messages(strategy, _URL, state, messages, fast_latest)
    slow_state, slow_changes = Strategy.apply_batch(strategy, _URL, state, messages)
    for change in slow_changes:
        keep_latest(slow_latest, change)
    assert fast == slow_state
    assert fast_latest == slow_latest


def test_coefficients_remembered_per_step_of_k_pages() -> None:
    """With k = 10 and a budget of 100, δ_t and α change only at multiples of 10: asked at
    clocks that jump back and forth (a Beam fold of one URL asks at many events' clocks),
    the remembered pair is always eq. 12's and eq. 5's at that clock. By hand: at 25,
    step 2, δ_t = 0.35 − 0.28·20/100 = 0.294 and α = e^(−0.1·2)."""
    params = IecaParams(budget=100, k=10)
    strategy = IecaStrategy(params)
    for crawled in (0, 3, 9, 10, 25, 12, 29, 30, 7, 99, 100, 250, 25):
        assert strategy.coefficients(crawled) == clock_coefficients(crawled, params)
    delta, a = strategy.coefficients(25)
    assert delta == pytest.approx(0.294) and a == pytest.approx(math.exp(-0.1 * 2))
