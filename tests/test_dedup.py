"""Test problems kept out of training: the matching rule, the catalogue-wide check, the loader's drop."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tracerl import tasks
from tracerl.core.errors import ConfigError
from tracerl.tasks import dedup
from tracerl.tasks.dedup import Index, Problem, catalogue_overlaps, normalize

pytest.importorskip("datasets")
DATA = Path(__file__).parent / "data"
AIME = ("Every morning Aya goes for a 9-kilometer-long walk and stops at a coffee shop afterwards. "
        "When she walks at a constant speed of s kilometers per hour, the walk takes her 4 hours.")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv("TRACERL_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dedup._domain_index.cache_clear()
    dedup._warn_unchecked.cache_clear()


def _index(*texts: str) -> Index:
    return Index(Problem("aime", str(i), normalize(t)) for i, t in enumerate(texts))


def test_normalisation_ignores_case_markup_and_spacing():
    assert normalize("Find $\\dfrac{1}{2}$ of  X,\n please!") == normalize("find \\frac{1}{2} of x please")
    assert normalize("\\left( x \\right)") == "x"
    assert normalize("Ünïcode ﬁle") == "ünïcode file"  # NFKC: the ligature is two letters


def test_a_copy_is_found_equal_or_with_words_added_but_not_when_edited():
    index = _index(AIME, "What is 2 + 3?")
    assert [p.row_id for p in index.find(normalize(AIME))] == ["0"]
    assert index.find(normalize("Problem 4 (AIME 2024 I). " + AIME + " Let's think step by step."))
    assert index.find(normalize(AIME.split(". When")[0] + "."))  # a shorter copy inside the test problem
    assert not index.find(normalize(AIME.replace("9-kilometer", "10-kilometer")))  # edited: not a copy
    assert [p.row_id for p in index.find(normalize("what is 2+3"))] == ["1"]  # short: equal only
    assert not index.find(normalize("What is 2 + 3 + 4?")) and not index.find("")


def test_deepscalers_copy_of_an_aime_problem_is_found_and_dropped_when_loading():
    found, missing = catalogue_overlaps(DATA)
    pairs = {(o.train, o.test) for o in found}
    assert ("deepscaler", "aime") in pairs and missing == []
    assert all(o.dropped for o in found if o.train == "deepscaler" and o.test == "aime")
    spec = tasks.get("deepscaler")
    raw = spec.source.rows("train", DATA, dedup=False)
    kept = spec.source.rows("train", DATA)
    assert len(kept) < len(raw)
    dropped = {normalize(spec.source.problem_text(r)) for r in raw} - {
        normalize(spec.source.problem_text(r)) for r in kept}
    tests = [tasks.get(name).source for name in ("aime", "omni-math")]  # the fixture plants a copy of each
    index = Index(Problem(b.name, b.row_id(r), normalize(b.problem_text(r))) for b in tests for r in b.rows("test", DATA))
    assert {p.benchmark for t in dropped for p in index.find(t)} == {"aime", "omni-math"}
    assert all(index.find(t) for t in dropped)


def test_after_the_loaders_dedup_no_train_row_of_the_catalogue_is_a_test_problem():
    found, missing = catalogue_overlaps(DATA, after_dedup=True)
    assert missing == []
    assert [o for o in found if o.dropped] == []  # same-domain copies are gone
    # a copy across domains is not dropped by the loader: there is none in the fixtures
    assert found == [], [(o.train, o.train_id, o.test, o.test_id) for o in found]


def test_a_test_set_that_cannot_be_loaded_is_named_once_not_skipped_silently(monkeypatch, caplog):
    def unreachable(self, split, path=None, dedup=True):
        raise ConfigError("aime: not reachable")

    monkeypatch.setattr(type(tasks.get("aime").source), "rows", unreachable)
    with caplog.at_level(logging.WARNING, logger="tracerl.tasks.dedup"):
        tasks.get("gsm8k").tasks("train", 2, path=DATA)
        tasks.get("gsm8k").tasks("train", 2, path=DATA)
    said = [r.getMessage() for r in caplog.records if "not checked" in r.getMessage()]
    assert len(said) == 1 and "aime" in said[0] and "gsm8k" in said[0]


def test_tasks_dedup_prints_the_overlaps(capsys):
    from tracerl.cli.main import main

    assert main(["tasks", "dedup", "--path", str(DATA)]) == 0
    out = capsys.readouterr().out
    assert "deepscaler train:" in out and "aime test problems (dropped when loading" in out
    assert main(["tasks", "dedup", "--path", str(DATA), "--after"]) == 0
    out = capsys.readouterr().out
    assert "no train row is a test problem: compared" in out and "test problems of" in out


def test_tasks_dedup_says_it_checked_nothing_when_no_data_is_reachable(capsys, tmp_path):
    from tracerl.cli.main import main

    assert main(["tasks", "dedup", "--path", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "nothing checked: 0 train rows" in out and "no train row is a test problem" not in out
