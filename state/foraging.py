"""A forager's walk and learning (Palotai, Farkas & Lőrincz 2005, long version) as pure
transitions.

A forager walks a site in *paths*: it restarts from a random URL of its start list (the
first entries of its weblog), then takes greedy steps to the frontier URL with the largest
estimated long-term profit w·x (Alg. "URL ordering" of the paper), and after a
fixed number of steps updates its weblog and starts again (Alg. "URL selection"). WL
foragers update their weblog (Alg. "weblog update"), RL foragers their weight vector by
TD(0) (Alg. "URL ordering update", the error of value estimation and its weight correction),
WL+RL both. Every transition here returns new values and never mutates its arguments;
randomness is drawn from (seed, key, counter) with `uniform_draw`, so a replay repeats bit
for bit.

The papers' text lost most constants (they show as @xmath): each one is a field of
`ForagerParams` with its default and where it came from ("paper" or "ours").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from frontierflow.state.automaton import uniform_draw
from frontierflow.state.forager import (
    HOUR_MS,
    ForagerPath,
    ForagerState,
    Variant,
    Vector,
    Weblog,
    empty_matrix,
    forager_key,
)


@dataclass(frozen=True, slots=True)
class ForagerParams:
    """A forager's constants, validated once. "paper" = stated in the papers; "ours" =
    their text lost it (@xmath) and the default is our choice."""

    dimensions: int = 50
    """Length of the document state vector x and of w (paper: 50 classifier outputs)."""
    start_list: int = 10
    """The start list is the first this-many weblog entries (paper: "the 10 first urls")."""
    weblog_size: int = 100
    """Weblog entries kept after truncation (ours: @xmath1 lost; 10× the start list)."""
    weblog_rate: float = 0.3
    """Rate toward the rest-of-path reward sum (paper: "@xmath2 was set to 0.3")."""
    path_length: int = 10
    """Steps of a path before the forager restarts (ours: @xmath106 lost)."""
    discount: float = 0.9
    """TD discount γ of the error of value estimation (ours: @xmath51 lost)."""
    learning_rate: float = 0.01
    """TD learning rate η of the weight correction (ours: @xmath57 lost)."""
    max_age_ms: int = 24 * HOUR_MS
    """A document is possibly relevant while not older than this (paper: 24 hours)."""

    def __post_init__(self) -> None:
        if self.dimensions < 1 or self.start_list < 1 or self.path_length < 1:
            raise ValueError("forager dimensions, start list and path length must be >= 1")
        if self.weblog_size < self.start_list:
            raise ValueError(
                f"weblog size {self.weblog_size} must hold the start list ({self.start_list})"
            )
        if not 0.0 < self.weblog_rate <= 1.0:
            raise ValueError(f"weblog rate must be in (0, 1], got {self.weblog_rate}")
        if not 0.0 <= self.discount <= 1.0:
            raise ValueError(f"TD discount must be in [0, 1], got {self.discount}")
        if not (self.learning_rate > 0.0 and math.isfinite(self.learning_rate)):
            raise ValueError(f"TD learning rate must be finite and > 0: {self.learning_rate}")
        if self.max_age_ms < 0:
            raise ValueError(f"max age must be >= 0 ms, got {self.max_age_ms}")


def random_weights(seed: int, forager_id: int, counter: int, dimensions: int) -> Vector:
    """A new weight vector, uniform in [−1, 1) per component, from (seed, forager, counter)."""
    key = f"{forager_key(forager_id)}/w{counter}"
    return np.array([2.0 * uniform_draw(seed, key, i) - 1.0 for i in range(dimensions)])


def new_forager(
    forager_id: int,
    variant: Variant,
    seeds: Sequence[str],
    seed: int,
    params: ForagerParams,
    weights: Vector | None = None,
) -> ForagerState:
    """Alg. "initialization of the forager": the seed URLs enter the weblog with value 0
    and the path starts empty (step 0), so the first selection starts a path."""
    if not seeds:
        raise ValueError("a forager needs at least one seed URL")
    w = random_weights(seed, forager_id, 0, params.dimensions) if weights is None else weights
    weblog = tuple((url, 0.0) for url in dict.fromkeys(seeds))[: params.weblog_size]
    path = ForagerPath(frontier_x=empty_matrix(params.dimensions))
    return ForagerState(forager_id, Variant(variant), w.copy(), weblog, path, draws=1)


def estimated_profit(weights: Vector, x: Vector) -> float:
    """The estimated long-term profit (LTP) of a document: the scalar product w·x."""
    return float(np.dot(weights, x))


def best_url(weights: Vector, frontier: Sequence[str], frontier_x: Vector) -> int | None:
    """Alg. "URL ordering": index of the frontier URL with the largest w·x (the first one on
    a tie, so the choice is deterministic); None for an empty frontier."""
    if not frontier:
        return None
    return int(np.argmax(frontier_x @ weights))


def rest_of_path_sums(rewards: Sequence[float]) -> list[float]:
    """R_i = Σ_{j≥i} r_j: the cumulated reward sum in reverse order (Alg. "weblog update")."""
    sums = [0.0] * len(rewards)
    total = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        total += rewards[i]
        sums[i] = total
    return sums


def weblog_update(
    weblog: Weblog, path: Sequence[str], rewards: Sequence[float], params: ForagerParams
) -> Weblog:
    """Alg. "weblog update" of the paper: a URL of the path already in the
    weblog moves its value toward R_i (the rewards of its step and the rest of the path) at
    rate 0.3; a new URL takes R_i; then sort in descending order and truncate.

    Ties keep the earlier order (weblog first, then new URLs in path order): the sort is
    stable, so an update is deterministic.
    """
    if len(path) != len(rewards):
        raise ValueError(f"path has {len(path)} steps but {len(rewards)} rewards")
    values = dict(weblog)
    rate = params.weblog_rate
    for url, total in zip(path, rest_of_path_sums(rewards), strict=True):
        old = values.get(url)
        values[url] = total if old is None else old + rate * (total - old)
    ranked = sorted(values.items(), key=lambda item: -item[1])
    return tuple(ranked[: params.weblog_size])


def start_list(weblog: Weblog, params: ForagerParams) -> tuple[str, ...]:
    """The starting URL list: the first `start_list` URLs of the weblog."""
    return tuple(url for url, _ in weblog[: params.start_list])


def td_step(
    weights: Vector, x: Vector, reward: float, x_next: Vector | None, params: ForagerParams
) -> tuple[Vector, float]:
    """TD(0) (the paper's "URL ordering update"): δ = r + γ·w·x' − w·x and w += η·δ·x.

    `x_next` None is the end of a path: its value is 0 (the path is an episode; ours, the
    seed does not say what closes a path). Returns the new weights and δ.
    """
    future = 0.0 if x_next is None else estimated_profit(weights, x_next)
    delta = reward + params.discount * future - estimated_profit(weights, x)
    return weights + params.learning_rate * delta * x, delta


def split_weblog(weblog: Weblog, seed: int, key: str, counter: int) -> tuple[Weblog, Weblog]:
    """Alg. "multiplication": the weblog is randomly divided into two equal-sized parts
    (the parent keeps the first ⌈n/2⌉). Each part keeps the descending order. The draw is a
    Fisher–Yates shuffle from (seed, key, counter…): counters counter..counter+n−2 are used.
    A weblog of one entry is copied, not split (ours: the seed does not say; an empty
    weblog would leave the child no start URL).
    """
    if len(weblog) < 2:
        return weblog, weblog
    order = list(range(len(weblog)))
    for i in range(len(order) - 1, 0, -1):
        j = int(uniform_draw(seed, key, counter + len(order) - 1 - i) * (i + 1))
        order[i], order[j] = order[j], order[i]
    half = (len(order) + 1) // 2
    kept = sorted(order[:half])
    given = sorted(order[half:])
    return tuple(weblog[i] for i in kept), tuple(weblog[i] for i in given)


def multiply(
    parent: ForagerState, child_id: int, seed: int, params: ForagerParams
) -> tuple[ForagerState, ForagerState]:
    """Alg. "multiplication": split the weblog in two; the child copies the weights if the
    forager updates them (RL, WL+RL) and draws new random ones otherwise (WL). The child
    starts with an empty path; the parent keeps its path and the other half."""
    key = forager_key(parent.forager_id)
    kept, given = split_weblog(parent.weblog, seed, key, parent.draws)
    draws = parent.draws + max(0, len(parent.weblog) - 1)
    if parent.variant.updates_weights:
        weights = parent.weights.copy()
    else:
        weights = random_weights(seed, child_id, 0, params.dimensions)
    child = ForagerState(
        child_id,
        parent.variant,
        weights,
        given,
        ForagerPath(frontier_x=empty_matrix(params.dimensions)),
        draws=1,
    )
    return replace(parent, weblog=kept, draws=draws), child


def is_possibly_relevant(
    published_ms: int | None, now_ms: int, already_sent: bool, params: ForagerParams
) -> bool:
    """Alg. "document relevancy at a forager": not older than 24 hours, not sent before.
    A page without a publication time (a hub page) is never sent."""
    if published_ms is None or already_sent:
        return False
    return 0 <= now_ms - published_ms <= params.max_age_ms


def _end_path(state: ForagerState, params: ForagerParams) -> ForagerState:
    """Close the current path: the last step's TD update toward 0 (RL), the weblog update
    (WL), and an empty path."""
    path = state.path
    weights, weblog = state.weights, state.weblog
    if state.variant.updates_weights and path.current_x is not None and path.rewards:
        weights, _ = td_step(weights, path.current_x, path.rewards[-1], None, params)
    if state.variant.updates_weblog and path.visited:
        weblog = weblog_update(weblog, path.visited, path.rewards, params)
    fresh = ForagerPath(frontier_x=empty_matrix(params.dimensions))
    return replace(state, weights=weights, weblog=weblog, path=fresh)


def select_next(state: ForagerState, seed: int, params: ForagerParams) -> tuple[ForagerState, str]:
    """Alg. "URL selection": within a path, the frontier URL with the largest w·x (an RL
    forager first learns from the step it leaves, TD with x' = x of the chosen URL); after
    `path_length` steps, or when the frontier is empty (ours: the paper's frontier never
    runs dry), the path ends and a new one starts at a random URL of the start list."""
    path = state.path
    index = best_url(state.weights, path.frontier, path.frontier_x)
    if 0 < len(path.visited) < params.path_length and index is not None:
        weights = state.weights
        x_next = path.frontier_x[index]
        if state.variant.updates_weights and path.current_x is not None:
            weights, _ = td_step(weights, path.current_x, path.rewards[-1], x_next, params)
        return replace(state, weights=weights), path.frontier[index]
    state = _end_path(state, params) if path.visited else state
    starts = start_list(state.weblog, params)
    u = uniform_draw(seed, forager_key(state.forager_id), state.draws)
    return replace(state, draws=state.draws + 1), starts[int(u * len(starts))]


def visit(
    state: ForagerState,
    url: str,
    x: Vector,
    links: Sequence[tuple[str, Vector]],
) -> ForagerState:
    """The forager downloaded `url` (state vector `x`) and the pages it links to: `url`
    leaves the frontier and joins the visited set; links not visited in this path join the
    frontier with their x (a link already there gets its fresh x). The step's reward
    starts at 0 (see `add_reward`)."""
    path = state.path
    frontier = list(path.frontier)
    rows = list(path.frontier_x)
    if url in path.frontier:
        i = frontier.index(url)
        del frontier[i]
        del rows[i]
    visited = (*path.visited, url)
    seen = set(visited)
    position = {u: i for i, u in enumerate(frontier)}
    for link, link_x in links:
        if link in seen:
            continue
        at = position.get(link)
        if at is None:
            position[link] = len(frontier)
            frontier.append(link)
            rows.append(link_x)
        else:
            rows[at] = link_x
    dims = state.weights.shape[0]
    matrix = np.array(rows, dtype=np.float64).reshape(len(rows), dims)
    new_path = ForagerPath(visited, (*path.rewards, 0.0), tuple(frontier), matrix, x.copy())
    return replace(state, path=new_path)


def add_reward(state: ForagerState, reward: float) -> ForagerState:
    """A reinforcement for a document sent during the current step adds to its reward."""
    path = state.path
    if not path.rewards:
        raise ValueError("a reward arrived before the forager visited any URL")
    rewards = (*path.rewards[:-1], path.rewards[-1] + reward)
    return replace(state, path=replace(path, rewards=rewards))
