"""The user's own tasks (tracerl.tasks.data): every source a user has, held-out splits that
never move, column mapping, and one clear line for each bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracerl
from tracerl.core.errors import ConfigError
from tracerl.tasks import data as d

ROWS = [{"question": f"What is {i} + 1?", "answer": i + 1} for i in range(40)]


def _jsonl(path: Path, rows=ROWS) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_rows_become_tasks_with_stable_ids(tmp_path):
    tasks = tracerl.load_tasks(_jsonl(tmp_path / "q.jsonl"))
    assert len(tasks) == 40 and tasks[3].data["question"] == "What is 3 + 1?" and tasks[3].answer == 4
    again = tracerl.load_tasks(_jsonl(tmp_path / "other.jsonl", list(reversed(ROWS))))
    assert {t.id: t.answer for t in tasks} == {t.id: t.answer for t in again}  # by content, not position
    with_ids = tracerl.load_tasks(_jsonl(tmp_path / "ids.jsonl", [{"id": "a", "q": "x", "answer": 1}]))
    assert with_ids[0].id == "a"


def test_csv_parquet_json_and_a_datasets_folder_give_the_same_tasks(tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"question": r["question"], "answer": str(r["answer"])} for r in ROWS[:5]]
    (tmp_path / "q.csv").write_text("question,answer\n" + "".join(f'"{r["question"]}",{r["answer"]}\n' for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "q.parquet")
    (tmp_path / "q.json").write_text(json.dumps(rows))
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    (tmp_path / "files").mkdir()
    _jsonl(tmp_path / "files" / "train.jsonl", rows)
    expected = [(t.id, t.data, t.answer) for t in tracerl.load_tasks(_jsonl(tmp_path / "q.jsonl", rows))]
    for source in ("q.csv", "q.parquet", "q.json", "saved", "files"):
        got = [(t.id, t.data, t.answer) for t in tracerl.load_tasks(tmp_path / source)]
        assert got == expected, source


def test_a_function_can_yield_rows_or_tasks(tmp_path):
    (tmp_path / "mine.py").write_text(
        "import tracerl\n"
        "def rows():\n    yield {'question': 'a', 'answer': 1}\n    yield {'question': 'b', 'answer': 2}\n"
        "def tasks():\n    return [tracerl.Task(id='t1', data={'q': 1}, answer=3)]\n")
    assert [t.answer for t in tracerl.load_tasks(f"{tmp_path / 'mine.py'}:rows")] == [1, 2]
    assert [t.id for t in tracerl.load_tasks(f"{tmp_path / 'mine.py'}:tasks")] == ["t1"]


def test_columns_are_renamed_for_the_agent(tmp_path):
    path = _jsonl(tmp_path / "p.jsonl", [{"prompt": "2+2?", "solution": 4}])
    [task] = tracerl.load_tasks(path, answer="solution", columns={"question": "prompt"})
    assert task.data["question"] == "2+2?" and task.answer == 4


def test_holdout_by_hash_never_moves_a_row_when_the_file_grows(tmp_path):
    cfg = d.DataConfig(path=str(tmp_path / "q.jsonl"), holdout=0.25)
    _jsonl(tmp_path / "q.jsonl", ROWS[:20])
    train, held = d.load_data(cfg)
    _jsonl(tmp_path / "q.jsonl", ROWS)
    train2, held2 = d.load_data(cfg)
    assert 0 < len(held) < 20 and {t.id for t in held} <= {t.id for t in held2}
    assert {t.id for t in train} <= {t.id for t in train2}
    assert not {t.id for t in train2} & {t.id for t in held2}


def test_a_split_column_and_an_eval_file(tmp_path):
    rows = [{**r, "split": "test" if i % 4 == 0 else "train"} for i, r in enumerate(ROWS)]
    train, held = d.load_data(d.DataConfig(path=str(_jsonl(tmp_path / "s.jsonl", rows)), split_column="split"))
    assert len(held) == 10 and len(train) == 30
    train, held = d.load_data(d.DataConfig(path=str(_jsonl(tmp_path / "a.jsonl", ROWS[:30])),
                                           eval_path=str(_jsonl(tmp_path / "b.jsonl", ROWS[30:]))))
    assert (len(train), len(held)) == (30, 10)


def test_training_draws_every_task_before_any_repeats(tmp_path, monkeypatch):
    monkeypatch.setattr(tracerl.tasks, "REGISTRY", dict(tracerl.tasks.REGISTRY))  # registered for this test only
    spec = tracerl.tasks.register("test-draws", str(_jsonl(tmp_path / "q.jsonl", ROWS[:10])), replace=True)
    drawn = [t.id for t in spec.tasks("train", 25, seed=3)]
    assert len(set(drawn[:10])) == 10 and set(drawn[10:20]) == set(drawn[:10]) and drawn[:10] != drawn[10:20]
    assert drawn == [t.id for t in spec.tasks("train", 25, seed=3)]  # seeded: the same every run
    with pytest.raises(ConfigError, match="'test-draws' is already registered"):
        tracerl.tasks.register("test-draws", str(tmp_path / "q.jsonl"))


@pytest.mark.parametrize(("name", "content", "message"), [
    ("missing.jsonl", None, r"data file .*missing.jsonl does not exist"),
    ("empty.jsonl", "", r"empty.jsonl: no rows"),
    ("bad.jsonl", '{"question": "a", "answer": 1}\n{"question": "b", answer: 2}\n',
     r"bad.jsonl, line 2: not valid JSON"),
    ("noanswer.jsonl", '{"question": "a", "solution": 1}\n',
     r"noanswer.jsonl: row 1 has no answer column 'answer'; its columns are \['question', 'solution'\]"),
    ("dups.jsonl", '{"id": "x", "answer": 1}\n{"id": "y", "answer": 2}\n{"id": "x", "answer": 3}\n',
     r"dups.jsonl: rows 1 and 3 have id 'x' twice"),
    ("same.jsonl", '{"answer": 1}\n{"answer": 1}\n', r"same.jsonl: rows 1 and 2 have the same question and answer \(and no id column"),
    ("list.jsonl", '[1, 2]\n', r"list.jsonl: row 1 is a int, not an object of columns"),
])
def test_bad_data_is_one_line_naming_the_file_and_row(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        tracerl.load_tasks(path)


def test_non_utf8_bytes_name_the_byte(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"question": "caf\xe9", "answer": 1}\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1.jsonl, line 1: byte 17 is not UTF-8.*save the file as UTF-8"):
        tracerl.load_tasks(path)


def test_a_mapped_column_that_is_missing_names_the_columns_found(tmp_path):
    with pytest.raises(ConfigError, match=r"row 1 has no column 'prompt' \(mapped to 'question'\); its columns "
                                          r"are \['answer', 'text'\]"):
        tracerl.load_tasks(_jsonl(tmp_path / "q.jsonl", [{"text": "a", "answer": 1}]), columns={"question": "prompt"})


def test_bad_splits_are_clear(tmp_path):
    path = str(_jsonl(tmp_path / "q.jsonl", ROWS[:3]))
    with pytest.raises(ConfigError, match=r"the held-out split is empty"):
        d.load_data(d.DataConfig(path=path, holdout=0.01))
    with pytest.raises(ConfigError, match=r"held-out task\(s\) are also in"):
        d.load_data(d.DataConfig(path=path, eval_path=path))
    with pytest.raises(ConfigError, match=r"has no split column 'fold'"):
        d.load_data(d.DataConfig(path=path, split_column="fold"))


def test_a_hub_id_offline_says_how_to_point_at_a_local_copy(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"hf:no-such-org/no-such-set: cannot load it .*HF_HUB_OFFLINE is set.*"
                                          r"save_to_disk\('DIR'\) and pass --data DIR"):
        tracerl.load_tasks("hf:no-such-org/no-such-set")


def test_a_data_function_that_does_not_import_is_clear(tmp_path):
    with pytest.raises(ConfigError, match=r"module 'no_such_module_xyz' cannot be imported"):
        tracerl.load_tasks("no_such_module_xyz:rows")
    with pytest.raises(ConfigError, match=r"is not a file, a folder, hf:org/name or module:function"):
        tracerl.load_tasks("questions")


def test_the_default_agent_needs_a_question_column_and_says_which_columns_there_are():
    from tracerl.tasks.data import question_messages

    with pytest.raises(ConfigError, match=r"task t1 has no text column 'question' for the default agent; map one "
                                          r"with --set data.columns.question=COLUMN \(its columns: \['prompt'\]\)"):
        question_messages(tracerl.Task(id="t1", data={"prompt": "2+2?"}))
    assert question_messages(tracerl.Task(id="t2", data={"question": "2+2?"})) == [
        {"role": "user", "content": "2+2?"}]
