"""A TRES-style focused-crawling learner (Kontogiannis et al. 2021, "Tree-based Focused Web
Crawling with Reinforcement Learning", arXiv 2112.07620), kept small: the crawl's whole
learner as one state per crawl, and the pure rules that move it.

What follows the paper: crawling is an MDP whose actions are (fetched page, outlink) pairs,
described by one state-action feature vector; the reward is 1 when the fetched page is
relevant and 0 otherwise; a value Q(s, a) is learned online with a double-Q target, r + γ ·
Q⁻(s', argmax_a' Q(s', a')), s' the page the action fetched and a' its outlinks, Q⁻ a target
copy refreshed every `target_period` updates; candidate links live in a Tree-Frontier
(`frontierflow.state.tres_tree`) and each choice evaluates one random representative per leaf
and takes the best (uniformly among leaves during the first `warmup` updates).

Where it departs, to stay small and within what the recorded webs carry:
- Q is linear, w · x, trained by one normalised semi-gradient step per fetch on that fetch's
  transition, w += rate · δ · x / |x|², instead of the paper's double deep Q-network trained
  on replayed batches;
- the features are the ones the other strategies here can see, after the state-action
  features the authors' implementation names (parent relevant, share of relevant pages on
  the path, distance from the last relevant page, topic keywords in the link's URL): no
  anchor text (the recorded webs carry none) and no per-domain relevance ratio (each manual
  is one host); best-first's signal, the parent's similarity, is one of them;
- relevance is the evaluation's judge (`Judge`) instead of a trained classifier, and the
  keyword set is the topic's, not expanded with word embeddings;
- learning carries over crawl cycles: Q, its target, the tree and its experience are kept,
  the frontier and the set of fetched links start afresh with each cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from frontierflow.state.tres_tree import TreeFrontier, TreeParams

FEATURES = (
    "bias",
    "parent_similarity",
    "parent_relevant",
    "path_relevant_share",
    "closeness_to_relevant",
    "url_similarity",
)
"""x for the action (page, link): 1; the page's topic similarity (best-first's signal);
1 when the page was judged relevant; the share of relevant pages on the path from the seed to
the page; 1/(1 + pages since the last relevant one on that path); the topic similarity of the
link's URL words."""
DIMS = len(FEATURES)


@dataclass(frozen=True, slots=True)
class TresParams:
    """The learner's constants (module docstring)."""

    gamma: float = 0.9
    rate: float = 0.02
    target_period: int = 50
    warmup: int = 10
    min_split: int = 5
    max_depth: int = 18
    min_share: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (0.0 <= self.gamma < 1.0 and 0.0 < self.rate <= 1.0):
            raise ValueError(f"gamma must be in [0, 1) and rate in (0, 1], got {self}")
        if self.target_period < 1 or self.warmup < 0:
            raise ValueError(f"target_period must be >= 1 and warmup >= 0, got {self}")
        TreeParams(self.min_split, self.max_depth, self.min_share)  # raises if out of range

    @property
    def tree(self) -> TreeParams:
        return TreeParams(self.min_split, self.max_depth, self.min_share)


@dataclass(slots=True)
class TresState:
    """The crawl's learner. `pending` is the link asked for and not answered yet ("" when
    none); `pending_x` its features (empty for a seed, which teaches nothing) and
    `pending_path` the path counts (pages, relevant pages, pages since the last relevant
    one) of the page that linked it. `fetched` holds the links asked for in this cycle."""

    weights: np.ndarray = field(default_factory=lambda: np.zeros(DIMS))
    target: np.ndarray = field(default_factory=lambda: np.zeros(DIMS))
    updates: int = 0
    draws: int = 0
    cycle: int = -1
    tree: TreeFrontier = field(default_factory=lambda: TreeFrontier(DIMS))
    fetched: set[str] = field(default_factory=set)
    seeds: list[str] = field(default_factory=list)
    pending: str = ""
    pending_x: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pending_path: np.ndarray = field(default_factory=lambda: np.zeros(3, np.int32))


@dataclass(frozen=True, slots=True)
class Choice:
    """The link to ask for next and its value Q(s, a) (0 for a seed)."""

    url: str
    value: float


def start_cycle(state: TresState, cycle: int) -> None:
    """A new crawl cycle: its frontier, fetched links and seeds start empty."""
    state.cycle = cycle
    state.tree.clear_frontier()
    state.fetched = set()
    state.seeds = []
    state.pending = ""
    state.pending_x = np.zeros(0)


def add_seed(state: TresState, url: str) -> None:
    """Queue a starting page of the cycle: seeds are asked for first, in order."""
    if url not in state.fetched and url not in state.seeds:
        state.seeds.append(url)


def child_features(
    similarity: float, relevant: bool, path: np.ndarray, url_similarities: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The feature rows of a fetched page's links and the page's own path counts, from its
    `similarity`, its verdict and the path counts of the page that linked it (zeros for a
    seed): pages L + 1, relevant pages R + r, pages since the last relevant one 0 if r else
    D + 1."""
    pages, good, since = (int(v) for v in path)
    pages, good = pages + 1, good + int(relevant)
    since = 0 if relevant else since + 1
    rows = np.empty((len(url_similarities), DIMS))
    rows[:, 0] = 1.0
    rows[:, 1] = similarity
    rows[:, 2] = float(relevant)
    rows[:, 3] = good / pages
    rows[:, 4] = 1.0 / (1.0 + since)
    rows[:, 5] = url_similarities
    return rows, np.array([pages, good, since], dtype=np.int32)


def td_update(
    state: TresState, x: np.ndarray, reward: float, next_rows: np.ndarray, params: TresParams
) -> float:
    """One double-Q step on the transition (x, reward, s'): y = reward + γ · w⁻ · x_{a*},
    a* = argmax over `next_rows` of w · x' (no bootstrap when s' has no links), then
    w += rate · (y − w · x) · x / |x|²; the target w⁻ copies w every `target_period` updates.
    Returns the TD error y − w · x."""
    bootstrap = 0.0
    if len(next_rows):
        best = int(np.argmax(next_rows @ state.weights))
        bootstrap = float(next_rows[best] @ state.target)
    error = reward + params.gamma * bootstrap - float(x @ state.weights)
    state.weights = state.weights + params.rate * error * x / float(x @ x)
    state.updates += 1
    if state.updates % params.target_period == 0:
        state.target = state.weights.copy()
    return error


def observe(
    state: TresState,
    url: str,
    similarity: float,
    relevant: bool,
    links: list[str],
    url_similarities: np.ndarray,
    params: TresParams,
) -> None:
    """A fetched page: when it answers the pending request, learn from the transition (its
    reward 1 if relevant, else 0) and file the experience in the tree; its links not asked
    for in this cycle join the frontier."""
    answered = url == state.pending
    path = state.pending_path if answered else np.zeros(3, np.int32)
    fresh = [i for i, link in enumerate(links) if link not in state.fetched]
    rows, own = child_features(similarity, relevant, path, url_similarities[fresh])
    if answered and len(state.pending_x):
        reward = 1.0 if relevant else 0.0
        td_update(state, state.pending_x, reward, rows, params)
        state.tree.add_experience(state.pending_x, reward, params.tree)
    if answered:
        state.pending, state.pending_x = "", np.zeros(0)
    state.fetched.add(url)
    extra = np.repeat(own[None, :], len(fresh), axis=0)
    state.tree.add_frontier([links[i] for i in fresh], rows, extra)


def choose(state: TresState, params: TresParams) -> Choice | None:
    """The next link to ask for, made pending: a queued seed, else the best representative
    of the Tree-Frontier's leaves by w · x (a uniformly drawn leaf's during `warmup`); None
    when the frontier is empty. Draws come from (seed, draw number): a replay repeats them."""
    if state.seeds:
        url = state.seeds.pop(0)
        state.fetched.add(url)
        state.pending, state.pending_x = url, np.zeros(0)
        state.pending_path = np.zeros(3, np.int32)
        return Choice(url, 0.0)
    rng = np.random.default_rng((params.seed, state.draws))
    state.draws += 1
    tree = state.tree
    reps = tree.representatives(rng, state.fetched)
    if not reps:
        return None
    samples = np.fromiter(reps.values(), dtype=np.int64, count=len(reps))
    values = tree.frontier[samples] @ state.weights
    warming = state.updates < params.warmup
    k = int(rng.integers(len(samples))) if warming else int(np.argmax(values))
    j = int(samples[k])
    tree.live[j] = False
    url = tree.urls[j]
    state.fetched.add(url)
    state.pending, state.pending_x = url, tree.frontier[j].copy()
    state.pending_path = tree.extra[j].copy()
    return Choice(url, float(values[k]))
