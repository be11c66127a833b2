"""The Tree-Frontier of Kontogiannis et al. 2021 (TRES, arXiv 2112.07620): a binary decision
tree over state-action feature vectors whose leaves group the crawl's candidate links, so that
choosing the next link evaluates one representative per leaf instead of every link.

The tree grows from *experience*: every fetched (state-action, reward) pair is filed in its
leaf, and a leaf splits on the (feature, value) whose split most reduces the variance of its
experience rewards, `var(parent) − n_l/n · var(left) − n_r/n · var(right)` (rows with
`x[feature] ≤ value` go left), when it holds at least `min_split` samples, lies above
`max_depth`, leaves at least `min_share` of them on each side and the reduction is positive.
Candidate links (*frontier samples*) are filed in the leaf their features fall in and follow a
split down to the children. A leaf's representative is one of its live frontier samples drawn
uniformly at random.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NO_CHILD = -1


@dataclass(frozen=True, slots=True)
class TreeParams:
    """When a leaf may split (the module docstring)."""

    min_split: int = 5
    max_depth: int = 18
    min_share: float = 0.0

    def __post_init__(self) -> None:
        if self.min_split < 2 or self.max_depth < 0 or not 0.0 <= self.min_share < 0.5:
            raise ValueError(
                "min_split must be >= 2, max_depth >= 0 and min_share in [0, 0.5), got "
                f"{self.min_split}, {self.max_depth}, {self.min_share}"
            )


def _empty(dims: int) -> np.ndarray:
    return np.empty((0, dims), dtype=np.float64)


@dataclass(slots=True)
class TreeFrontier:
    """The tree, its experience and its frontier samples as flat arrays (cheap to encode).

    Node i is a leaf when `left[i] == NO_CHILD`; otherwise rows with `x[feature[i]] ≤
    threshold[i]` go to `left[i]`, the others to `right[i]`. Frontier sample j is the link
    `urls[j]`, with features `frontier[j]` and `extra[j]` (what the caller keeps beside them),
    filed in leaf `frontier_leaf[j]`, live while `live[j]`.
    """

    dims: int
    feature: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int32))
    threshold: np.ndarray = field(default_factory=lambda: np.zeros(1, np.float64))
    left: np.ndarray = field(default_factory=lambda: np.full(1, NO_CHILD, np.int32))
    right: np.ndarray = field(default_factory=lambda: np.full(1, NO_CHILD, np.int32))
    depth: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int32))
    experience: np.ndarray = field(default_factory=lambda: _empty(0))
    rewards: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    experience_leaf: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    urls: list[str] = field(default_factory=list)
    frontier: np.ndarray = field(default_factory=lambda: _empty(0))
    extra: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int32))
    frontier_leaf: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __post_init__(self) -> None:
        if self.experience.shape[1] != self.dims:
            self.experience = _empty(self.dims)
        if self.frontier.shape[1] != self.dims:
            self.frontier = _empty(self.dims)

    @property
    def nodes(self) -> int:
        return len(self.left)

    def leaves(self) -> list[int]:
        """The leaves' node ids, in increasing order."""
        return np.flatnonzero(self.left == NO_CHILD).tolist()

    def leaf_of(self, x: np.ndarray) -> int:
        """The leaf a feature vector falls in."""
        node = 0
        left, right, feature, threshold = self.left, self.right, self.feature, self.threshold
        while left[node] != NO_CHILD:
            node = int(left[node] if x[feature[node]] <= threshold[node] else right[node])
        return node

    def leaves_of(self, rows: np.ndarray) -> np.ndarray:
        """The leaf of each row of `rows`, all rows descending together."""
        nodes = np.zeros(len(rows), dtype=np.int32)
        inner = self.left[nodes] != NO_CHILD
        while inner.any():
            at = nodes[inner]
            go_left = rows[inner, self.feature[at]] <= self.threshold[at]
            nodes[inner] = np.where(go_left, self.left[at], self.right[at])
            inner = self.left[nodes] != NO_CHILD
        return nodes

    def add_frontier(self, urls: list[str], rows: np.ndarray, extra: np.ndarray) -> None:
        """File candidate links (one row of features and of `extra` each) in their leaves."""
        if not urls:
            return
        self.urls.extend(urls)
        self.frontier = np.concatenate([self.frontier, rows])
        self.extra = np.concatenate([self.extra, extra.astype(np.int32)])
        self.frontier_leaf = np.concatenate([self.frontier_leaf, self.leaves_of(rows)])
        self.live = np.concatenate([self.live, np.ones(len(urls), bool)])

    def clear_frontier(self) -> None:
        """Forget every candidate link (a new crawl cycle); the tree and experience stay."""
        self.urls = []
        self.frontier = _empty(self.dims)
        self.extra = np.zeros((0, 3), np.int32)
        self.frontier_leaf = np.zeros(0, np.int32)
        self.live = np.zeros(0, bool)

    def representatives(self, rng: np.random.Generator, fetched: set[str]) -> dict[int, int]:
        """Leaf → one live frontier sample drawn uniformly from it, leaves in increasing order;
        samples whose link was fetched since they were filed are retired on the way (a link
        is filed once per page that links it)."""
        live = np.flatnonzero(self.live)
        order = np.argsort(self.frontier_leaf[live], kind="stable")
        grouped = live[order]
        leaves, starts = np.unique(self.frontier_leaf[grouped], return_index=True)
        ends = [*starts[1:].tolist(), len(grouped)] if len(starts) else []
        out: dict[int, int] = {}
        for leaf, start, end in zip(leaves.tolist(), starts.tolist(), ends, strict=True):
            candidates = grouped[start:end]
            while len(candidates):
                k = int(rng.integers(len(candidates)))
                j = int(candidates[k])
                if self.urls[j] not in fetched:
                    out[leaf] = j
                    break
                self.live[j] = False
                candidates = np.delete(candidates, k)
        return out

    def add_experience(self, x: np.ndarray, reward: float, params: TreeParams) -> bool:
        """File a fetched (state-action, reward) in its leaf and split that leaf if a split
        qualifies; True when it split."""
        leaf = self.leaf_of(x)
        self.experience = np.concatenate([self.experience, x[None, :]])
        self.rewards = np.append(self.rewards, reward)
        self.experience_leaf = np.append(self.experience_leaf, np.int32(leaf))
        split = best_split(
            self.experience[self.experience_leaf == leaf],
            self.rewards[self.experience_leaf == leaf],
            int(self.depth[leaf]),
            params,
        )
        if split is None:
            return False
        self._split(leaf, *split)
        return True

    def _split(self, leaf: int, feature: int, value: float) -> None:
        left, right = self.nodes, self.nodes + 1
        child_depth = self.depth[leaf] + 1
        self.feature = np.append(self.feature, [0, 0]).astype(np.int32)
        self.threshold = np.append(self.threshold, [0.0, 0.0])
        self.left = np.append(self.left, [NO_CHILD, NO_CHILD]).astype(np.int32)
        self.right = np.append(self.right, [NO_CHILD, NO_CHILD]).astype(np.int32)
        self.depth = np.append(self.depth, [child_depth, child_depth]).astype(np.int32)
        self.feature[leaf], self.threshold[leaf] = feature, value
        self.left[leaf], self.right[leaf] = left, right
        for rows, owner in (
            (self.experience, self.experience_leaf),
            (self.frontier, self.frontier_leaf),
        ):
            mine = owner == leaf
            owner[mine] = np.where(rows[mine, feature] <= value, left, right)


def best_split(
    rows: np.ndarray, rewards: np.ndarray, depth: int, params: TreeParams
) -> tuple[int, float] | None:
    """The (feature, value) of the largest positive variance reduction of `rewards` over a
    leaf's experience `rows` at `depth`, or None (the module docstring's rule). Ties keep the
    first found, features and values in increasing order."""
    n = len(rewards)
    if n < params.min_split or depth >= params.max_depth:
        return None
    parent = float(np.var(rewards))
    best, found = 0.0, None
    floor = params.min_share * n
    for feature in range(rows.shape[1]):
        column = rows[:, feature]
        for value in np.unique(column)[:-1]:  # the largest value leaves no row on the right
            go_left = column <= value
            n_left = int(np.count_nonzero(go_left))
            n_right = n - n_left
            if n_left < max(1.0, floor) or n_right < max(1.0, floor):
                continue
            reduction = (
                parent
                - np.var(rewards[go_left]) * n_left / n
                - np.var(rewards[~go_left]) * n_right / n
            )
            if reduction > best + 1e-12:
                best, found = float(reduction), (feature, float(value))
    return found
