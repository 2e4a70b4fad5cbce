"""The search tool of the QA tasks: BM25 over a set of passages, by ``bm25s``.

    index = BM25(["Paris: Paris is the capital of France.", ...])
    index.search("capital of France", k=3)     # [(score, passage index), ...], best first

``bm25s`` (sparse-matrix BM25, numpy only; ``pip install 'tracerl[tasks]'``) with its
defaults: Lucene's BM25 variant, k1 = 1.5, b = 0.75, English stop words removed. Only
passages with a positive score are returned: a query sharing no word with any passage finds
nothing, as a search engine would say.
"""

from __future__ import annotations

import functools
from typing import Any

from tracerl.core.errors import require


def _bm25s() -> Any:
    return require("bm25s", "bm25s", "tasks", "the QA tasks' search tool")


class BM25:
    """A BM25 index over ``docs``; build once per corpus (a row's paragraphs or a split's)."""

    def __init__(self, docs: list[str]):
        self.docs = list(docs)
        bm25s = _bm25s()
        self._bm25s = bm25s
        self._index = bm25s.BM25()
        if self.docs:
            self._index.index(bm25s.tokenize(self.docs, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int = 3) -> list[tuple[float, int]]:
        """The ``k`` best (score, index) pairs with a positive score, best first."""
        if not self.docs or not query.strip():
            return []
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.ids or not tokens.ids[0]:  # only stop words, or nothing the index knows
            return []
        found, scores = self._index.retrieve(tokens, k=min(k, len(self.docs)), show_progress=False)
        hits = [(float(s), int(i)) for s, i in zip(scores[0], found[0]) if s > 0]
        return sorted(hits, key=lambda h: (-h[0], h[1]))


@functools.lru_cache(maxsize=256)
def cached_index(docs: tuple[str, ...]) -> BM25:
    """One index per distinct passage set: a group of rollouts of one task searches one corpus."""
    return BM25(list(docs))
