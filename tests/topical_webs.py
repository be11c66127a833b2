"""Small recorded webs for focused-crawl tests: what `simulate_cycles` crawls."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Web:
    """Pages with the given outlinks (page indices) and term counts; page i is at
    `urls[i]` (default https://w.invalid/i)."""

    def __init__(
        self,
        links: Sequence[Sequence[int]],
        terms: Sequence[dict[str, int]],
        urls: Sequence[str] | None = None,
    ) -> None:
        self.urls = (
            list(urls)
            if urls is not None
            else [f"https://w.invalid/{i}" for i in range(len(links))]
        )
        self._links = [np.asarray(lk, dtype=np.int32) for lk in links]
        self.terms = list(terms)
        self._index = {u: i for i, u in enumerate(self.urls)}

    def outlinks(self, i: int) -> np.ndarray:
        return self._links[i]

    def index_of(self, url: str) -> int:
        return self._index[url]


def random_web(n: int, seed: int) -> Web:
    """n pages over 5 hosts, each linking up to 6 random pages; the terms mention "tcp" and
    "socket" 0–2 times each beside a filler word, so similarities spread over (0, 1]."""
    rng = np.random.default_rng(seed)
    links = [np.unique(rng.integers(0, n, 6)).tolist() for _ in range(n)]
    terms = [
        {"tcp": int(rng.integers(0, 3)), "socket": int(rng.integers(0, 3)), "x": 2}
        for _ in range(n)
    ]
    return Web(links, terms, [f"https://h{i % 5}.docs.invalid/p{i}.html" for i in range(n)])
