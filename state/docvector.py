"""The document state vector x of a forager (Palotai, Farkas & Lőrincz 2005, long version:
50 tanh-squashed classifier outputs).

Palotai, Farkas & Lőrincz 2005 (long version) reduced a page's text to 50 outputs of prTFIDF
classifiers trained on clusters of an earlier crawl, squashed into [−1, 1] by tanh. We have
no such classifiers: ours is a hashed tf-idf projection — each term adds tf·idf to one of
`dimensions` buckets with a sign, both taken from a keyed hash of the term (blake2b, so the
same on every machine and in every process) — squashed by tanh as in the paper.
Deterministic, fast, and like the paper's x it knows only what the downloaded page offers.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from frontierflow.state.relevance import STOP_WORDS, tokenise

Vector = npt.NDArray[np.float64]


def term_slot(term: str, dimensions: int) -> tuple[int, float]:
    """The bucket and sign of `term` (blake2b of the term; stable across processes)."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dimensions, 1.0 if (value >> 32) & 1 else -1.0


class DocumentVectors:
    """Hashed tf-idf projections with document frequencies counted over a corpus."""

    def __init__(self, corpus: Iterable[str], dimensions: int = 50, scale: float = 1.0) -> None:
        if dimensions < 1:
            raise ValueError(f"dimensions must be >= 1, got {dimensions}")
        self.dimensions = dimensions
        self.scale = scale
        df: Counter[str] = Counter()
        n = 0
        for text in corpus:
            n += 1
            df.update(set(self.terms(text)))
        self._n = n
        self._idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        self._unseen_idf = math.log(1 + n) + 1.0
        self._slots: dict[str, tuple[int, float]] = {}

    @staticmethod
    def terms(text: str) -> list[str]:
        return [t for t in tokenise(text) if t not in STOP_WORDS]

    def idf(self, term: str) -> float:
        """Smoothed idf: ln((1 + N)/(1 + df)) + 1; a term outside the corpus has df 0."""
        return self._idf.get(term, self._unseen_idf)

    def vector_of_counts(self, counts: Mapping[str, int]) -> Vector:
        """x = tanh(scale · Σ_t tf(t)·idf(t)·sign(t)·e_bucket(t)), tf = count / max count."""
        x = np.zeros(self.dimensions)
        if not counts:
            return x
        top = max(counts.values())
        for term, count in counts.items():
            slot = self._slots.get(term)
            if slot is None:
                slot = self._slots[term] = term_slot(term, self.dimensions)
            x[slot[0]] += slot[1] * (count / top) * self.idf(term)
        return np.tanh(self.scale * x / max(1.0, math.sqrt(len(counts))))

    def counts(self, texts: Iterable[str]) -> dict[str, int]:
        """Term counts of a page whose text is `texts`, in first-occurrence order (what a
        FetchEvent's `terms` carries; `vector_of_counts` of them is `vector(texts)`)."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(self.terms(text))
        return dict(counts)

    def vector(self, texts: Iterable[str]) -> Vector:
        """x of a page whose text is `texts` (title, section, anchor texts of its links)."""
        return self.vector_of_counts(self.counts(texts))
