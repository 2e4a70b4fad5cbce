"""Loading real benchmarks: local rows in each dataset's real schema, the hub call, the errors."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from tracerl import tasks
from tracerl.core.errors import ConfigError
from tracerl.core.types import Task

DATA = Path(__file__).parent / "data"
# name -> (a tracerl split it has, number of rows in tests/data)
LOCAL = {"gsm8k": ("test", 3), "math500": ("test", 4), "hendrycks_math": ("test", 5), "aime": ("test", 5),
         "finqa": ("test", 3), "humaneval": ("test", 3), "mbpp": ("test", 3), "hotpotqa": ("test", 3)}


@pytest.fixture(autouse=True)
def _empty_hf_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


@pytest.mark.parametrize("name", sorted(LOCAL))
def test_local_rows_load_through_path_and_the_data_dir(name, monkeypatch):
    split, count = LOCAL[name]
    spec = tasks.get(name)
    loaded = spec.tasks(split, 10, seed=0, path=DATA)
    assert len(loaded) == count and all(isinstance(t, Task) for t in loaded)
    assert {t.dataset for t in loaded} == {name} and {t.split for t in loaded} == {split}
    assert len({t.id for t in loaded}) == count and all(t.answer not in (None, "") for t in loaded)
    messages = spec.messages(loaded[0])
    assert messages[-1]["role"] == "user" and messages[-1]["content"]
    monkeypatch.setenv("TRACERL_DATA_DIR", str(DATA))
    assert [t.id for t in spec.tasks(split, 10, seed=0)] == [t.id for t in loaded]
    assert sorted(t.id for t in spec.tasks(split, 10, seed=1)) == sorted(t.id for t in loaded)


def test_references_are_taken_from_each_schema():
    by_name = {name: tasks.get(name).tasks(LOCAL[name][0], 10, path=DATA) for name in LOCAL}
    assert sorted(t.answer for t in by_name["gsm8k"]) == ["1500", "18", "3"]
    assert sorted(t.answer for t in by_name["hendrycks_math"]) == [
        "9", "\\frac{14}{3}", "\\frac{5}{6}", "\\left( -2, 2 \\right)", "\\left( 3, \\frac{\\pi}{2} \\right)"]
    assert {t.id for t in by_name["math500"]} >= {"math500/test/algebra/2584.json"}
    assert {t.id: t.answer for t in by_name["aime"]}["aime/0"] == "116"
    assert {t.answer for t in by_name["hotpotqa"]} == {"Mount Tarn", "1998", "Copper Hill Bridge"}


def test_a_split_the_hub_lacks_is_a_config_error():
    for name in ("aime", "math500", "humaneval"):
        with pytest.raises(ConfigError, match="has no 'train' split"):
            tasks.get(name).tasks("train", 1, path=DATA)


def test_one_shared_hub_split_is_partitioned_by_row_hash():
    spec = tasks.get("countdown-hub")
    train = spec.tasks("train", 7, path=DATA)
    test = spec.tasks("test", 7, path=DATA)
    assert len(train) == 7 and len(test) == 1
    assert not {t.id for t in train} & {t.id for t in test}
    assert all(t.answer == t.data["target"] for t in train)
    assert len(spec.tasks("test", 5, path=DATA)) == 1  # test never repeats rows


def test_train_cycles_through_reshuffled_epochs():
    picked = tasks.get("gsm8k").tasks("test", 7, path=DATA)
    assert len(picked) == 3
    cycled = tasks.get("countdown-hub").tasks("train", 16, path=DATA)
    assert len(cycled) == 16 and len({t.id for t in cycled}) == 16
    assert sum(t.id.endswith("/e1") for t in cycled) == 7


def test_parquet_files_and_split_folders_load(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines()]
    (tmp_path / "gsm8k" / "test").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "gsm8k" / "test" / "part-0.parquet")
    loaded = tasks.get("gsm8k").tasks("test", 5, path=tmp_path)
    assert sorted(t.answer for t in loaded) == ["1500", "18", "3"]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "one.parquet")
    assert len(tasks.get("gsm8k").tasks("test", 5, path=tmp_path / "one.parquet")) == 3


def test_a_path_without_the_split_says_what_it_looked_for(tmp_path):
    with pytest.raises(ConfigError, match="no test.jsonl, test.parquet"):
        tasks.get("gsm8k").tasks("test", 1, path=tmp_path)
    with pytest.raises(ConfigError, match="generated"):
        tasks.get("arithmetic").tasks("train", 1, path=tmp_path)


def _fake_datasets(monkeypatch, calls):
    class FakeDataset:
        def __init__(self, rows):
            self.rows = rows

        def to_list(self):
            return self.rows

    def load_dataset(path, name=None, *, split=None, **kwargs):
        calls.append((path, name, split, kwargs))
        gsm8k = [{"question": "What is 1 + 1?", "answer": "1 + 1 = 2\n#### 2"}]
        return FakeDataset(gsm8k if path == "openai/gsm8k" else [])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))


def test_the_hub_branch_calls_load_dataset_with_the_real_id_and_config(monkeypatch):
    calls: list = []
    _fake_datasets(monkeypatch, calls)
    rows = tasks.get("gsm8k").source.rows("train", dedup=False)
    assert calls == [("openai/gsm8k", "main", "train", {})]
    assert tasks.get("gsm8k").source.to_task(rows[0], "train").answer == "2"
    calls.clear()  # with the dedup: the domain's test sets are loaded, and the fake's one row is a test problem
    assert tasks.get("gsm8k").tasks("train", 1) == []
    assert ("openai/gsm8k", "main", "test", {}) in calls and ("AI-MO/aimo-validation-aime", None, "train", {}) in calls
    expected = {
        "math500": [("HuggingFaceH4/MATH-500", None, "test", {})],
        "aime": [("AI-MO/aimo-validation-aime", None, "train", {})],
        "humaneval": [("openai/openai_humaneval", None, "test", {})],
        "mbpp": [("google-research-datasets/mbpp", "full", "test", {})],
        "hotpotqa": [("hotpotqa/hotpot_qa", "distractor", "validation", {})],
        "finqa": [("dreamerdeo/finqa", None, "test", {"revision": "refs/convert/parquet"})],
        "countdown-hub": [("Jiayi-Pan/Countdown-Tasks-3to4", None, "train", {})],
    }
    for name, want in expected.items():
        calls.clear()
        tasks.get(name).source.rows("test")
        assert calls == want, name
    calls.clear()
    tasks.get("hendrycks_math").source.rows("train")
    assert [c[1] for c in calls] == ["algebra", "counting_and_probability", "geometry", "intermediate_algebra",
                                     "number_theory", "prealgebra", "precalculus"]
    assert {c[0] for c in calls} == {"EleutherAI/hendrycks_math"}


def test_offline_without_local_data_is_a_one_line_config_error():
    pytest.importorskip("datasets")
    with pytest.raises(ConfigError) as caught:
        tasks.get("gsm8k").tasks("test", 2)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("gsm8k: the dataset 'openai/gsm8k' (main) split 'test' is not reachable")
    assert "TRACERL_DATA_DIR=data" in message and "data/gsm8k/test.jsonl" in message
    assert "HF_HUB_OFFLINE is set and it is not in the HF cache" in message  # the id and the cause, one line


def test_without_the_datasets_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ConfigError, match=r"pip install 'tracerl\[tasks\]'") as caught:
        tasks.get("mbpp").tasks("train", 1)
    assert "\n" not in str(caught.value)


def test_a_data_dir_without_this_benchmark_falls_through_to_the_hub(monkeypatch, tmp_path):
    calls: list = []
    _fake_datasets(monkeypatch, calls)
    monkeypatch.setenv("TRACERL_DATA_DIR", str(tmp_path))
    tasks.get("gsm8k").tasks("test", 1)
    assert calls and calls[0][0] == "openai/gsm8k"
