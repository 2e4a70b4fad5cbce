"""A tiny BM25 index over a handful of passages, pure Python: the search tool of QA tasks.

    index = BM25(["Paris: Paris is the capital of France.", ...])
    index.search("capital of France", k=3)     # [(score, passage index), ...], best first

BM25 (Robertson & Zaragoza, 2009), with k1 = 1.5, b = 0.75 and the non-negative idf
``log(1 + (N - df + 0.5) / (df + 0.5))``. Tokens are lower-cased word characters, less a short
stop-word list.
"""

from __future__ import annotations

import math
import re
from collections import Counter

_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is",
    "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "what", "which",
    "who", "whom", "whose", "when", "where", "why", "how", "did", "do", "does", "with"
})


def tokenize(text: str) -> list[str]:
    return [t for t in re.findall(r"\w+", text.lower()) if t not in _STOP]


class BM25:
    """Okapi BM25 over ``docs``; build once per corpus (a row's paragraphs or a split's)."""

    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75):
        self.docs = docs
        self.k1, self.b = k1, b
        self._tf = [Counter(tokenize(d)) for d in docs]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avg = sum(self._len) / len(docs) if docs else 0.0
        df = Counter(term for tf in self._tf for term in tf)
        n = len(docs)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def score(self, query: str, i: int) -> float:
        tf, length = self._tf[i], self._len[i]
        norm = self.k1 * (1 - self.b + self.b * length / (self._avg or 1.0))
        return sum(self._idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in tokenize(query) if t in tf)

    def search(self, query: str, k: int = 3) -> list[tuple[float, int]]:
        """The ``k`` best (score, index) pairs with a positive score, best first."""
        scored = [(self.score(query, i), i) for i in range(len(self.docs))]
        return sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
