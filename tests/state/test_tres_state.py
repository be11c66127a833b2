"""The TRES-style learner's rules (Kontogiannis et al. 2021, arXiv 2112.07620), worked by
hand: the double-Q step, the features of a page's links, the Tree-Frontier's split and leaf
selection, and the state's encoding."""

from __future__ import annotations

import numpy as np
import pytest

from frontierflow.state.storage.codec import StateCodecError
from frontierflow.state.tres import (
    TresParams,
    TresState,
    add_seed,
    child_features,
    choose,
    observe,
    start_cycle,
    td_update,
)
from frontierflow.state.tres_codec import decode_tres, encode_tres
from frontierflow.state.tres_tree import TreeFrontier, TreeParams, best_split


def _x(*head: float) -> np.ndarray:
    """A feature row: `head` then zeros, six features."""
    return np.array([*head, *[0.0] * (6 - len(head))])


def test_double_q_step_by_hand() -> None:
    # γ = 0.5, rate = 0.5, the target copied every 2 updates.
    # w = (0.2, 0.4, 0, 0, 0, 0), w⁻ = (0.1, 0, 0, 0, 0, 1).
    # The fetched action x = (1, 0.5, 0, ...): w·x = 0.2 + 0.2 = 0.4, |x|² = 1.25.
    # Its page links two pages (s'):
    #   a = (1, 0.5, 1, 0, 0, 0.5): w·a = 0.4, w⁻·a = 0.1 + 0.5 = 0.6
    #   b = (1, 1.0, 1, 0, 0, 0.2): w·b = 0.6, w⁻·b = 0.1 + 0.2 = 0.3
    # Double Q: the online w picks b, the target values it: 0.3 (not max w⁻ = 0.6).
    # Reward 1 (the page is relevant): y = 1 + 0.5 · 0.3 = 1.15, δ = 1.15 − 0.4 = 0.75,
    # w += 0.5 · 0.75 · x / 1.25 = 0.3 x → w = (0.5, 0.55, 0, ...).
    params = TresParams(gamma=0.5, rate=0.5, target_period=2)
    state = TresState(weights=_x(0.2, 0.4), target=_x(0.1, 0, 0, 0, 0, 1.0))
    x = _x(1.0, 0.5)
    links = np.array([[1.0, 0.5, 1, 0, 0, 0.5], [1.0, 1.0, 1, 0, 0, 0.2]])
    assert td_update(state, x, 1.0, links, params) == pytest.approx(0.75)
    np.testing.assert_allclose(state.weights, _x(0.5, 0.55))
    np.testing.assert_allclose(state.target, _x(0.1, 0, 0, 0, 0, 1.0))  # not copied yet
    # Reward 0, a page without links (no bootstrap): w·x = 0.5 + 0.275 = 0.775,
    # δ = −0.775, w += 0.5 · (−0.775) · x / 1.25 = −0.31 x → w = (0.19, 0.395, 0, ...);
    # the second update copies w into the target.
    assert td_update(state, x, 0.0, np.zeros((0, 6)), params) == pytest.approx(-0.775)
    np.testing.assert_allclose(state.weights, _x(0.19, 0.395))
    np.testing.assert_allclose(state.target, state.weights)
    assert state.updates == 2


def test_link_features_follow_the_path() -> None:
    # The parent's path: 2 pages, 1 relevant, 0 pages since it. The page (similarity 0.6)
    # is not relevant: 3 pages, 1 relevant, 1 since → share 1/3, closeness 1/(1 + 1).
    rows, own = child_features(0.6, False, np.array([2, 1, 0]), np.array([0.0, 0.7]))
    np.testing.assert_allclose(rows[1], [1.0, 0.6, 0.0, 1 / 3, 0.5, 0.7])
    assert own.tolist() == [3, 1, 1]
    # a relevant seed (no path before it): 1 page, 1 relevant, 0 since
    rows, own = child_features(0.9, True, np.zeros(3), np.array([0.0]))
    np.testing.assert_allclose(rows[0], [1.0, 0.9, 1.0, 1.0, 1.0, 0.0])


def test_split_takes_the_largest_variance_reduction() -> None:
    # Rewards (0, 0, 1, 1). Feature 1 = (0.1, 0.2, 0.8, 0.9): split at 0.2 leaves (0, 0) and
    # (1, 1): var 0.25 − 0 − 0 = 0.25. Feature 2 = (0, 1, 0, 1): split at 0 leaves (0, 1) on
    # both sides: 0.25 − 0.125 − 0.125 = 0. The bias (feature 0) cannot split.
    rows = np.array([_x(1, 0.1, 0), _x(1, 0.2, 1), _x(1, 0.8, 0), _x(1, 0.9, 1)])
    rewards = np.array([0.0, 0.0, 1.0, 1.0])
    assert best_split(rows, rewards, 0, TreeParams(min_split=4)) == (1, 0.2)
    assert best_split(rows, rewards, 0, TreeParams(min_split=5)) is None  # too few samples
    assert best_split(rows, rewards, 1, TreeParams(min_split=4, max_depth=1)) is None
    # each side must keep min_share of the samples: 0.2 → 1 of 4 is not enough... but 2 is
    assert best_split(rows, rewards, 0, TreeParams(min_split=4, min_share=0.3)) == (1, 0.2)
    assert best_split(rows, np.ones(4), 0, TreeParams(min_split=4)) is None  # nothing to gain


def _split_tree() -> TreeFrontier:
    """A tree split at parent similarity 0.2 (feature 1), with three candidate links: two
    in the left leaf, one in the right."""
    tree = TreeFrontier(6)
    params = TreeParams(min_split=4)
    for sim, reward in ((0.1, 0.0), (0.2, 0.0), (0.8, 1.0)):
        assert not tree.add_experience(_x(1, sim), reward, params)
    assert tree.add_experience(_x(1, 0.9), 1.0, params)  # the fourth sample splits the root
    assert tree.leaves() == [1, 2] and tree.feature[0] == 1 and tree.threshold[0] == 0.2
    urls = ["https://w.invalid/a", "https://w.invalid/b", "https://w.invalid/c"]
    rows = np.array([_x(1, 0.1), _x(1, 0.15), _x(1, 0.7)])
    tree.add_frontier(urls, rows, np.zeros((3, 3)))
    assert tree.frontier_leaf.tolist() == [1, 1, 2]
    assert tree.experience_leaf.tolist() == [1, 1, 2, 2]
    return tree


def test_leaf_representatives_and_the_greedy_choice() -> None:
    tree = _split_tree()
    reps = tree.representatives(np.random.default_rng(0), set())
    assert sorted(reps) == [1, 2] and reps[1] in (0, 1) and reps[2] == 2
    # links fetched since they were filed are retired: the left leaf has no representative
    fetched = _split_tree()
    reps = fetched.representatives(
        np.random.default_rng(0), {"https://w.invalid/a", "https://w.invalid/b"}
    )
    assert reps == {2: 2} and fetched.live.tolist() == [False, False, True]
    # greedy over representatives: w = (0, 1, 0, ...) values them by parent similarity,
    # 0.15 (left) against 0.7 (right): the right leaf's link, at Q = 0.7
    state = TresState(weights=_x(0, 1.0), tree=tree, cycle=0)
    choice = choose(state, TresParams(warmup=0))
    assert choice is not None and (choice.url, choice.value) == ("https://w.invalid/c", 0.7)
    assert state.pending == "https://w.invalid/c" and not tree.live[2]
    # then the right leaf is empty: the left leaf's two links, one drawn at a time
    left = set()
    for _ in range(2):
        state.pending = ""
        choice = choose(state, TresParams(warmup=0))
        assert choice is not None
        left.add(choice.url)
    assert left == {"https://w.invalid/a", "https://w.invalid/b"}
    state.pending = ""
    assert choose(state, TresParams(warmup=0)) is None  # the frontier is empty


def test_seeds_first_then_learning_from_the_answer() -> None:
    params = TresParams(gamma=0.5, rate=1.0, warmup=0)
    state = TresState()
    start_cycle(state, 0)
    add_seed(state, "https://w.invalid/s")
    first = choose(state, params)
    assert first is not None and first.url == "https://w.invalid/s"
    # the seed (similarity 1, relevant) links two pages; a seed's answer teaches nothing
    links = ["https://w.invalid/a", "https://w.invalid/b"]
    observe(state, first.url, 1.0, True, links, np.array([0.0, 0.5]), params)
    assert state.updates == 0 and len(state.tree.urls) == 2 and state.pending == ""
    # w = 0: every value 0, the first leaf's only link... both sit in the root leaf
    chosen = choose(state, params)
    assert chosen is not None and chosen.url in links and chosen.value == 0.0
    # the answer: relevant, no links → y = 1, δ = 1, w += 1 · x / |x|²
    observe(state, chosen.url, 0.8, True, [], np.zeros(0), params)
    x = state.tree.frontier[links.index(chosen.url)]
    np.testing.assert_allclose(state.weights, x / (x @ x))
    assert state.updates == 1 and state.tree.rewards.tolist() == [1.0]


def test_encoding_round_trips_and_refuses_garbage() -> None:
    state = TresState(weights=_x(0.5, 0.25), target=_x(0.1), tree=_split_tree(), cycle=2)
    state.fetched = {"https://w.invalid/a"}
    state.seeds = ["https://w.invalid/s"]
    state.pending, state.pending_x = "https://w.invalid/c", _x(1, 0.7)
    state.tree.live[1] = False
    back = decode_tres(encode_tres(state))
    assert encode_tres(back) == encode_tres(state)
    assert back.tree.urls == state.tree.urls and back.tree.live.tolist() == [True, False, True]
    assert back.tree.leaves() == [1, 2] and back.fetched == state.fetched
    np.testing.assert_array_equal(back.tree.experience, state.tree.experience)
    with pytest.raises(StateCodecError):
        decode_tres(encode_tres(state)[:40])
    with pytest.raises(StateCodecError):
        decode_tres(b"\x09" + encode_tres(state)[1:])
    empty = TresState()
    assert decode_tres(encode_tres(empty)).tree.nodes == 1


def test_constants_are_checked() -> None:
    with pytest.raises(ValueError, match="gamma"):
        TresParams(gamma=1.0)
    with pytest.raises(ValueError, match="target_period"):
        TresParams(target_period=0)
    with pytest.raises(ValueError, match="min_split"):
        TresParams(min_split=1)
