r"""Test problems kept out of training: no catalogue train split holds a benchmark's test problem.

Training sets are often assembled from old competitions: DeepScaleR holds AIME problems up
to 2023 and AMC problems, MMLU's auxiliary_train holds ARC questions. A run trained on such a
set and evaluated on AIME or ARC would measure memory, so a benchmark's "train" rows are
checked against the test problems of every benchmark of its domain (its own included) and the
copies dropped, with one log line saying how many and whose (:func:`drop_test_problems`).
``tracerl tasks dedup`` runs the same check across the whole catalogue, domains crossed.

Two problems are the same when, normalised (:func:`normalize`: NFKC, lower case, LaTeX
markup and punctuation gone, ``\dfrac`` = ``\frac``), they are equal, or the shorter, of at
least :data:`MIN_WORDS` words, appears whole inside the longer: a copy with an instruction or
preamble added ("Let's think step by step", "Put the answer in \boxed{}"). Edited copies
(numbers changed, words reordered) are not caught: that is a near-duplicate search, not this.

Test sets that cannot be loaded (offline, gated) are named in one warning, not skipped silently.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracerl.core.errors import ConfigError

log = logging.getLogger(__name__)

MIN_WORDS = 8  # a shorter problem counts only when equal: "What is 2 + 3?" is in many sets
_GRAM = MIN_WORDS
_LATEX = re.compile(r"\\(?:left|right|displaystyle|big|Big|bigl|bigr|,|;|!|quad|qquad)(?![a-zA-Z])")
_WORD = re.compile(r"[^\W_]+")


def normalize(text: str) -> str:
    """``text`` as lower-case words of letters and digits, one space apart."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return " ".join(_WORD.findall(_LATEX.sub(" ", text)))


@dataclass(frozen=True)
class Problem:
    """One test problem: where it comes from and its normalised text."""

    benchmark: str
    row_id: str
    text: str


class Index:
    """Test problems, searchable for equality and whole containment (see the module docstring)."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = [p for p in problems if p.text]
        self._exact: dict[str, list[int]] = defaultdict(list)
        self._grams: dict[tuple[str, ...], list[int]] = defaultdict(list)
        self._size: list[int] = []
        for i, problem in enumerate(self.problems):
            self._exact[problem.text].append(i)
            grams = _grams(problem.text)
            self._size.append(len(grams))
            for gram in grams:
                self._grams[gram].append(i)

    def __len__(self) -> int:
        return len(self.problems)

    def find(self, text: str) -> list[Problem]:
        """The test problems that normalised ``text`` equals, contains or is contained in."""
        hits = list(self._exact.get(text, ()))
        grams = _grams(text)
        if grams:
            shared = Counter(i for gram in grams for i in self._grams.get(gram, ()))
            for i, count in shared.items():
                if i in hits:
                    continue
                other = self.problems[i].text
                if (count == self._size[i] and f" {other} " in f" {text} ") or \
                        (count == len(grams) and f" {text} " in f" {other} "):
                    hits.append(i)
        return [self.problems[i] for i in hits]


def _grams(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    if len(words) < MIN_WORDS:
        return set()
    return {tuple(words[i:i + _GRAM]) for i in range(len(words) - _GRAM + 1)}


def test_problems(bench: Any, path: str | os.PathLike[str] | None) -> list[Problem]:
    """``bench``'s test problems (empty for a benchmark with no test role or no rows)."""
    if "test" not in getattr(bench, "splits", {}) or not hasattr(bench, "problem_text"):
        return []
    return [Problem(bench.name, bench.row_id(row), normalize(bench.problem_text(row)))
            for row in bench.rows("test", path)]


@functools.lru_cache(maxsize=16)
def _domain_index(domain: str, path: str | None, data_dir: str | None) -> tuple[Index, tuple[str, ...]]:
    """The test problems of every registered benchmark of ``domain``, and the benchmarks whose
    test rows could not be loaded (``data_dir`` is only part of the cache key)."""
    index, missing = _test_index([b for b in _catalogue() if b.domain == domain], path)
    return index, tuple(missing)


def _catalogue() -> list[Any]:
    """The registered benchmarks (the user's tasks and generated ones have no hub data to check)."""
    from . import REGISTRY

    return [s.source for s in REGISTRY.values() if hasattr(s.source, "hub")]


def _test_index(benches: list[Any], path: str | os.PathLike[str] | None) -> tuple[Index, list[str]]:
    """The test problems of ``benches``, and the names of those whose test rows could not be loaded."""
    problems: list[Problem] = []
    missing: list[str] = []
    for bench in benches:
        try:
            problems += test_problems(bench, path)
        except ConfigError:
            missing.append(bench.name)
    return Index(problems), missing


def drop_test_problems(bench: Any, rows: list[dict[str, Any]],
                       path: str | os.PathLike[str] | None) -> list[dict[str, Any]]:
    """``rows`` of ``bench``'s train split without the test problems of its domain's benchmarks."""
    key = None if path is None else str(path)
    index, missing = _domain_index(bench.domain, key, os.environ.get("TRACERL_DATA_DIR"))
    if missing:
        _warn_unchecked(bench.name, missing)
    kept: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    for row in rows:
        hits = index.find(normalize(bench.problem_text(row)))
        if hits:
            dropped.update({p.benchmark for p in hits})
        else:
            kept.append(row)
    if dropped:
        whose = ", ".join(f"{name} ({n})" for name, n in sorted(dropped.items()))
        log.info("%s: dropped %d of %d train rows that are test problems of %s", bench.name,
                 len(rows) - len(kept), len(rows), whose)
    return kept


@functools.cache
def _warn_unchecked(name: str, missing: tuple[str, ...]) -> None:
    log.warning("%s: train rows not checked against the test problems of %s (their data is not reachable "
                "here); tracerl tasks dedup names them once it is", name, ", ".join(missing))


@dataclass(frozen=True)
class Overlap:
    """A train row of ``train`` that is test problem ``test_id`` of ``test``."""

    train: str
    train_id: str
    test: str
    test_id: str
    dropped: bool  # whether loading ``train`` drops it (same domain)


@dataclass
class Checked:
    """What :func:`check_catalogue` compared: the overlaps it found, the benchmarks whose rows could
    not be loaded, and the rows it did compare (train rows and test problems per benchmark)."""

    found: list[Overlap] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    train_rows: dict[str, int] = field(default_factory=dict)
    test_problems: dict[str, int] = field(default_factory=dict)


def check_catalogue(path: str | os.PathLike[str] | None = None, names: Iterable[str] | None = None,
                    after_dedup: bool = False) -> Checked:
    """Every train row of the catalogue (or of ``names``) that is a test problem of any catalogue
    benchmark, with what was compared and what could not be loaded. ``after_dedup``: check the
    train rows as a run gets them (same-domain copies already dropped)."""
    benches = _catalogue()
    index, missing = _test_index(benches, path)
    out = Checked(missing=missing, test_problems=dict(Counter(p.benchmark for p in index.problems)))
    wanted = set(names) if names is not None else None
    domains = {bench.name: bench.domain for bench in benches}
    for bench in benches:
        if "train" not in bench.splits or (wanted is not None and bench.name not in wanted):
            continue
        try:
            rows = bench.rows("train", path, dedup=after_dedup)
        except ConfigError:
            out.missing.append(bench.name)
            continue
        out.train_rows[bench.name] = len(rows)
        for row in rows:
            for hit in index.find(normalize(bench.problem_text(row))):
                out.found.append(Overlap(bench.name, bench.row_id(row), hit.benchmark, hit.row_id,
                                         domains.get(hit.benchmark) == bench.domain))
    out.missing = sorted(set(out.missing))
    return out


def catalogue_overlaps(path: str | os.PathLike[str] | None = None, names: Iterable[str] | None = None,
                       after_dedup: bool = False) -> tuple[list[Overlap], list[str]]:
    """:func:`check_catalogue`'s overlaps and the benchmarks it could not load."""
    checked = check_catalogue(path, names, after_dedup)
    return checked.found, checked.missing
