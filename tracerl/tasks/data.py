"""Tasks from the user's own data: a file, a dataset folder, a Hugging Face id or a function.

    tasks = tracerl.load_tasks("questions.jsonl")                       # list[Task]
    tasks = tracerl.load_tasks("hf:openai/gsm8k:main@test", columns={"question": "question"})

Sources (:func:`load_rows`): JSON lines (``.jsonl``), a JSON array (``.json``), CSV
(``.csv``), Parquet (``.parquet``, ``[parquet]`` extra), a local Hugging Face ``datasets``
folder (written by ``save_to_disk``, or a folder of data files), a hub id
``hf:org/name[:config][@split]`` (through ``datasets.load_dataset``; ``[tasks]`` extra), and a
Python callable ``module:fn`` or ``path/file.py:fn`` that returns or yields rows (dicts) or
:class:`~tracerl.core.types.Task` objects.

Each row becomes a Task: ``data`` the row, with ``columns`` renamed into the names the agent
reads, ``{name the agent reads: column in the file}``, so ``{"question": "prompt"}`` (on the
command line ``--set data.columns.question=prompt``) fills ``data["question"]`` from the
file's ``prompt`` column; ``answer`` from the answer column; ``id`` from the id column
(``data.id``, default ``id``) when the row has one, else a hash of what the agent is asked and
the answer: the ``question``, every mapped column and the answer (the whole row when it has
none of these), so an id never changes between runs and a column added later changes none.
Empty questions, answers or mapped cells are refused, with their row numbers.

A held-out split is a second source, a split column, or a fraction of the rows chosen by
the hash of each id, so a row never moves between splits when the file grows or gains a
column (but naming another ``data.id`` column gives every row a new id, and a new split):

>>> from tracerl.tasks.data import DataConfig, rows_to_tasks, split_tasks
>>> rows = [{"prompt": f"What is {i} + 1?", "solution": i + 1} for i in range(100)]
>>> tasks = rows_to_tasks(rows, "rows", answer="solution", columns={"question": "prompt"})
>>> tasks[0].data["question"], tasks[0].answer
('What is 0 + 1?', 1)
>>> train, held_out = split_tasks(tasks, DataConfig(path="rows", holdout=0.2))
>>> len(train) + len(held_out), len(held_out)
(100, 23)
>>> wider = rows_to_tasks([{**r, "source": "v2"} for r in rows], "rows", answer="solution",
...                       columns={"question": "prompt"})
>>> [t.id for t in wider] == [t.id for t in tasks]
True

A row's question also has a key, :func:`task_key` (a hash of its ``question`` with whitespace
collapsed): traces whose sessions carry no task id are matched to held-out rows by the key of
their first user message (``tracerl.trainers.rft``).

Every problem is one :class:`ConfigError` line naming the file, the row (or line) and the
column.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracerl.core.errors import ConfigError, MissingDependencyError
from tracerl.core.ids import row_id
from tracerl.core.imports import load_callable
from tracerl.core.types import Task

HF_PREFIX = "hf:"
_FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


class DataConfig(BaseModel):
    """Where a run's tasks come from when they are the user's own (``--data``)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="JSONL/JSON/CSV/Parquet file, datasets folder, hf:org/name[:config][@split], "
                                  "or module:fn / file.py:fn returning rows")
    eval_path: str | None = Field(None, description="held-out tasks from another source (same forms)")
    answer: str | None = Field("answer", description="column holding the reference answer (None: no reference)")
    id: str = Field("id", description="column holding a task id; rows without one get a hash of their question, "
                    "mapped columns and answer. The held-out split follows the id: another id column moves rows")
    columns: dict[str, str] = Field(
        default_factory=dict, description="rename columns for the agent: {name the agent reads: column in the "
        "file}; --set data.columns.question=prompt fills task.data['question'] from the prompt column")
    split_column: str | None = Field(None, description="column that says each row's split")
    eval_split: str = Field("test", description="the split_column value of held-out rows")
    holdout: float = Field(0.0, ge=0.0, lt=1.0, description="fraction of rows held out, chosen by a hash of "
                           "each row's id")


def load_tasks(source: str | os.PathLike[str], *, answer: str | None = "answer", id: str = "id",
               columns: Mapping[str, str] | None = None, name: str | None = None) -> list[Task]:
    """The tasks of ``source`` (see the module docstring); ``name`` labels them (``Task.dataset``)."""
    label = str(source)
    return rows_to_tasks(load_rows(label), label, answer=answer, id=id, columns=columns, name=name)


def rows_to_tasks(rows: list[Any], label: str, *, answer: str | None = "answer", id: str = "id",
                  columns: Mapping[str, str] | None = None, name: str | None = None) -> list[Task]:
    """Rows (dicts or Tasks) as Tasks, checked; ``label`` names them in errors."""
    if not rows:
        raise ConfigError(f"{label}: no rows; put one task per row (JSON lines: one object per line)")
    columns = columns or {}
    tasks = [_task(row, i, label, answer=answer, id_column=id, columns=columns, name=name)
             for i, row in enumerate(rows, 1)]
    _check_filled(tasks, rows, label, answer, columns)
    _check_unique(tasks, label)
    return tasks


def split_tasks(tasks: list[Task], cfg: DataConfig, eval_tasks: list[Task] | None = None
                ) -> tuple[list[Task], list[Task]]:
    """(training tasks, held-out tasks) as ``cfg`` says: ``eval_tasks`` (from ``eval_path``),
    else the split column, else ``holdout`` by hash, else none held out."""
    if eval_tasks is not None:
        train, held = tasks, eval_tasks
        overlap = sorted({t.id for t in train} & {t.id for t in held})
        if overlap:
            raise ConfigError(f"{cfg.eval_path}: {len(overlap)} held-out task(s) are also in {cfg.path} "
                              f"(ids {', '.join(overlap[:3])}); held-out tasks must be ones training never sees")
    elif cfg.split_column is not None:
        missing = next((t for t in tasks if cfg.split_column not in t.data), None)
        if missing is not None:
            raise ConfigError(f"{cfg.path}: task {missing.id} has no split column {cfg.split_column!r}; "
                              f"its columns are {sorted(missing.data)}")
        held = [t for t in tasks if str(t.data[cfg.split_column]) == cfg.eval_split]
        train = [t for t in tasks if str(t.data[cfg.split_column]) != cfg.eval_split]
    elif cfg.holdout > 0:
        held = [t for t in tasks if _fraction(t) < cfg.holdout]
        train = [t for t in tasks if _fraction(t) >= cfg.holdout]
    else:
        return tasks, []
    for what, part in (("training", train), ("held-out", held)):
        if not part:
            raise ConfigError(f"{cfg.path}: the {what} split is empty ({len(tasks)} rows; split_column="
                              f"{cfg.split_column!r}, eval_split={cfg.eval_split!r}, holdout={cfg.holdout}); "
                              "change the split or add rows")
    return train, held


def load_data(cfg: DataConfig) -> tuple[list[Task], list[Task]]:
    """(training tasks, held-out tasks) of a :class:`DataConfig`."""
    options: dict[str, Any] = {"answer": cfg.answer, "id": cfg.id, "columns": cfg.columns}
    tasks = load_tasks(cfg.path, **options)
    held = load_tasks(cfg.eval_path, **options) if cfg.eval_path else None
    return split_tasks(tasks, cfg, held)


def question_key(question: str) -> str:
    """The key of a question's text: a hash of its words one space apart, so a trace's first
    user message and the data row it asked get the same key whatever whitespace the app put
    around or inside it. What decides held-out membership of a trace without a task id."""
    return "q-" + hashlib.sha256(" ".join(question.split()).encode()).hexdigest()[:16]


def task_key(task: Task) -> str | None:
    """:func:`question_key` of a task's ``question`` (after ``data.columns``), None without one."""
    question = task.data.get("question")
    return question_key(question) if isinstance(question, str) and question.strip() else None


def _fraction(task: Task) -> float:
    """Where the task falls in [0, 1), by a hash of its id: the same every run."""
    digest = hashlib.sha256(("holdout:" + task.id).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _task(row: Any, number: int, label: str, *, answer: str | None, id_column: str,
          columns: Mapping[str, str], name: str | None) -> Task:
    if isinstance(row, Task):
        return row
    if not isinstance(row, Mapping):
        raise ConfigError(f"{label}: row {number} is a {type(row).__name__}, not an object of columns")
    data = {str(k): v for k, v in row.items()}
    for ours, theirs in columns.items():
        if theirs not in data:
            backwards = (f"; data.columns maps the name the agent reads to the file's column, so if the agent "
                         f"reads {theirs!r} from the file's {ours!r}, write --set data.columns.{theirs}={ours}"
                         if ours in data else "")
            raise ConfigError(f"{label}: row {number} has no column {theirs!r} (mapped to {ours!r}); "
                              f"its columns are {sorted(data)}{backwards}")
        data[ours] = data[theirs]
    if answer is not None and answer not in data:
        raise ConfigError(f"{label}: row {number} has no answer column {answer!r}; its columns are {sorted(data)} "
                          "(name the right one with --set data.answer=COLUMN)")
    task_id = data.get(id_column)
    if task_id is None or str(task_id).strip() == "":
        task_id = "row-" + _row_hash(row, data, answer, columns)
    return Task(id=str(task_id), data=data, answer=data.get(answer) if answer else None, dataset=name)


def _asked(data: Mapping[str, Any], columns: Mapping[str, str]) -> list[str]:
    """The fields a row asks the agent: its question and every mapped column."""
    return sorted(k for k in {"question", *columns} if k in data)


def _row_hash(row: Mapping[Any, Any], data: Mapping[str, Any], answer: str | None, columns: Mapping[str, str]) -> str:
    """A row's stable id: a hash of what it asks and its answer (of the whole row when it asks
    nothing by name), so a column added to the file moves no row to another split."""
    asked = {k: data[k] for k in _asked(data, columns)}
    return row_id(row, asked, data.get(answer) if answer else None).removeprefix("row-")


def _check_filled(tasks: list[Task], rows: list[Any], label: str, answer: str | None,
                  columns: Mapping[str, str]) -> None:
    """Refuse rows whose question, answer or mapped cell is empty (a CSV's missing value is an
    empty string): the agent would be asked nothing, or graded against nothing."""
    empty: dict[str, list[int]] = {}
    for number, (task, row) in enumerate(zip(tasks, rows), 1):
        if isinstance(row, Task):
            continue
        for name in [*_asked(task.data, columns), *([answer] if answer is not None else [])]:
            value = task.data.get(name)
            if value is None or (isinstance(value, str) and not value.strip()):
                column = columns.get(name, name)
                empty.setdefault(column if column == name else f"{column} (read as {name})", []).append(number)
    if empty:
        column, numbers = next(iter(empty.items()))
        shown = ", ".join(map(str, numbers[:8])) + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")
        others = f"; other empty columns: {', '.join(list(empty)[1:])}" if len(empty) > 1 else ""
        raise ConfigError(f"{label}: column {column} is empty in row{'s' if len(numbers) > 1 else ''} {shown}{others}; "
                          "fill those cells or drop the rows")


def _check_unique(tasks: list[Task], label: str) -> None:
    seen: dict[str, int] = {}
    for number, task in enumerate(tasks, 1):
        if task.id in seen:
            what = ("the same question and answer (and no id column: name one with --set data.id=COLUMN if "
                    "they are different tasks)") if task.id.startswith("row-") else f"id {task.id!r} twice"
            raise ConfigError(f"{label}: rows {seen[task.id]} and {number} have {what}; task ids must be unique "
                              "(remove the duplicate or give each row its own id)")
        seen[task.id] = number


# -- sources -----------------------------------------------------------------------------


def load_rows(source: str) -> list[Any]:
    """The rows of one source, as dicts (or Tasks from a callable)."""
    if source.startswith(HF_PREFIX):
        return _hub_rows(source)
    path = Path(source)
    if path.is_dir():
        return _folder_rows(path)
    if path.suffix in _FILE_SUFFIXES or path.exists():
        if not path.is_file():
            raise ConfigError(f"data file {path} does not exist")
        return read_rows(path)
    if ":" in source:
        return _callable_rows(source)
    raise ConfigError(f"data {source!r} is not a file, a folder, hf:org/name or module:function; "
                      f"a data file ends in {', '.join(_FILE_SUFFIXES)}")


def read_rows(path: Path) -> list[Any]:
    """Rows of one JSONL, JSON, CSV or Parquet file."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise MissingDependencyError("pyarrow", "parquet", f"Reading {path}") from None
        try:
            return list(pq.read_table(path).to_pylist())
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors are many; one line names the file
            raise ConfigError(f"{path}: not a readable Parquet file ({exc})") from exc
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # a byte-order mark is allowed
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}, line {line_no}: byte {exc.start} is not UTF-8 ({exc.reason}); "
                          "save the file as UTF-8") from exc
    if path.suffix == ".csv":
        return list(csv.DictReader(text.splitlines()))
    if path.suffix == ".json" or text.lstrip().startswith("["):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})") from exc
        return list(doc) if isinstance(doc, list) else [doc]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}, line {number}: not valid JSON ({exc.msg}); "
                                  "JSON lines hold one object per line") from exc
    return rows


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise MissingDependencyError("datasets", "tasks", "Reading Hugging Face datasets") from None
    return datasets


def _folder_rows(path: Path) -> list[Any]:
    """A ``save_to_disk`` folder (``dataset_info.json`` or ``dataset_dict.json``), else a folder
    of data files read by ``datasets.load_dataset`` (its first split: train when it has one)."""
    datasets = _datasets()
    try:
        if (path / "dataset_dict.json").exists() or (path / "dataset_info.json").exists():
            found = datasets.load_from_disk(str(path))
        else:
            found = datasets.load_dataset(str(path))
    except Exception as exc:  # noqa: BLE001 - datasets raises many kinds; one line names the folder
        raise ConfigError(f"data folder {path} could not be read as a dataset: {exc}") from exc
    if isinstance(found, datasets.DatasetDict):
        split = "train" if "train" in found else next(iter(found))
        found = found[split]
    return list(found)


def _hub_rows(source: str) -> list[Any]:
    """``hf:org/name[:config][@split]`` through ``datasets.load_dataset`` (split: train)."""
    spec = source[len(HF_PREFIX):]
    spec, _, split = spec.partition("@")
    dataset_id, _, config = spec.partition(":")
    if not dataset_id:
        raise ConfigError(f"{source!r}: write hf:org/name[:config][@split]")
    datasets = _datasets()
    try:
        found = datasets.load_dataset(dataset_id, config or None, split=split or "train")
    except Exception as exc:  # noqa: BLE001
        offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        hint = ("HF_HUB_OFFLINE is set, so only datasets already in the local cache load; on a machine with "
                f"network run datasets.load_dataset({dataset_id!r}).save_to_disk('DIR') and pass --data DIR"
                if offline else "check the id, config and split on the Hub")
        raise ConfigError(f"{source}: cannot load it ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                          f"{hint}") from exc
    return list(found)


def _callable_rows(source: str) -> list[Any]:
    fn = load_callable(source, "data")
    name = source.rpartition(":")[2]
    found = fn()
    if not isinstance(found, Iterable) or isinstance(found, (str, bytes, Mapping)):
        raise ConfigError(f"data {source!r}: {name}() returned a {type(found).__name__}; return or yield rows")
    return list(found)


class UserTasks:
    """A registered task made of the user's rows: what :class:`~tracerl.tasks.TaskSpec`
    asks of a task source. Training draws the pool in a seeded order, a new order each pass,
    so no task repeats before every one was seen; the held-out split is always the same."""

    max_turns = 1

    def __init__(self, name: str, train: list[Task], test: list[Task]):
        self.name = name
        self.train = [t if t.split else t.model_copy(update={"split": "train"}) for t in train]
        self.test = [t if t.split else t.model_copy(update={"split": "test"}) for t in test]

    def tasks(self, split: str, n: int, seed: int = 0) -> list[Task]:
        if split == "train":
            if not self.train:
                raise ConfigError(f"task {self.name!r} has no training rows")
            out: list[Task] = []
            epoch = 0
            while len(out) < n:
                out += sorted(self.train, key=lambda t: _order_key(t.id, seed, epoch))
                epoch += 1
            return out[:n]
        return sorted(self.test, key=lambda t: _order_key(t.id, seed, -1))[:n]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return question_messages(task)

    def feedback(self, task: Task, text: str | None, turn: int) -> str | None:
        return None


def question_messages(task: Task) -> list[dict[str, Any]]:
    """The default agent's prompt for a row: its ``question`` as one user turn."""
    question = task.data.get("question")
    if not isinstance(question, str):
        raise ConfigError(f"task {task.id} has no text column 'question' for the default agent; map one with "
                          f"--set data.columns.question=COLUMN (its columns: {sorted(task.data)}), "
                          "or pass --agent")
    return [{"role": "user", "content": question}]


def _order_key(task_id: str, seed: int, epoch: int) -> bytes:
    return hashlib.sha256(f"{seed}:{epoch}:{task_id}".encode()).digest()
