"""Real benchmarks: the :class:`Benchmark` base (rows -> Tasks, splits, the declared schema).

Each benchmark names its Hugging Face dataset (:class:`~tracerl.tasks.loaders.Hub`) and maps
tracerl's splits to the hub's (``splits``). A split the hub lacks is not faked: ``aime``,
``math500`` and ``humaneval`` are evaluation sets with no "train". When both tracerl splits
map to one hub split (``countdown-hub`` has only "train"), a row goes to "test" when the hash
of its id falls in the lowest 20%, so the two never overlap.

Rows are checked against the features the dataset declares on its card
(:mod:`~tracerl.tasks.catalogue.schema`) wherever they come from, and a "train" split loses
every row that is a test problem of a benchmark of its domain (:mod:`~tracerl.tasks.dedup`):
past AIME problems inside a training set never reach a run evaluated on AIME.

``tasks(split, n, seed)`` shuffles the split with a seeded RNG and takes ``n`` rows; "train"
cycles through reshuffled epochs when ``n`` exceeds the split (ids get an ``/e<epoch>``
suffix), "test" returns at most the whole split. ``Task.data`` is the raw row in the dataset's
own schema; ``Task.answer`` the reference the grader compares against.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
from typing import Any, ClassVar

from tracerl.core.errors import ConfigError
from tracerl.core.types import Task

from .loaders import Hub, load_rows

log = logging.getLogger(__name__)

TEST_FRACTION = 0.2
CHAT_AGENT = "tracerl.tasks.bench_agents:chat_agent"
DOMAINS = ("math", "code", "finance", "search-qa", "multiple-choice", "tool-use", "instruction-following",
           "games", "terminal", "synthetic")


def in_test(key: str) -> bool:
    """Whether a row with id ``key`` belongs to the held-out part of a shared hub split."""
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:4], "big") < TEST_FRACTION * 2**32


def seeded_draw(key: str, size: int, n: int, *, cycle: bool) -> list[tuple[int, int]]:
    """``n`` draws (epoch, index) from ``size`` items in an order seeded by ``key``; with ``cycle``
    each pass over all items is reshuffled and the draws go on, else they stop after one pass."""
    rng = random.Random(key)
    picked: list[tuple[int, int]] = []
    epoch = 0
    while len(picked) < n and size and (epoch == 0 or cycle):
        order = list(range(size))
        rng.shuffle(order)
        picked += [(epoch, i) for i in order[: n - len(picked)]]
        epoch += 1
    return picked


class Benchmark:
    """A dataset-backed task. Subclasses set the class attributes and override the hooks."""

    name: ClassVar[str] = ""
    hub: ClassVar[Hub]
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "test"}
    description: ClassVar[str] = ""
    domain: ClassVar[str] = ""
    grader: ClassVar[str] = ""  # one line: how a reply is scored (tracerl tasks show, docs/benchmarks.md)
    tool_names: ClassVar[tuple[str, ...]] = ()  # the tools the default agent offers
    default_agent: ClassVar[str] = CHAT_AGENT
    max_turns: ClassVar[int] = 1
    id_key: ClassVar[str | None] = None  # the column holding a row id, if the dataset has one
    question_key: ClassVar[str] = "question"  # the column holding the problem statement
    reference_solutions: ClassVar[bool] = True  # whether rows carry what solution() builds a reply from

    # -- hooks -----------------------------------------------------------------------------

    def row_id(self, row: dict[str, Any]) -> str:
        if self.id_key is not None:
            return str(row[self.id_key])
        return hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def reference(self, row: dict[str, Any]) -> Any:
        return row.get("answer")

    def problem_text(self, row: dict[str, Any]) -> str:
        """The problem as a reader would recognise it elsewhere: what the dedup check compares."""
        return str(row.get(self.question_key) or "")

    def messages(self, task: Task) -> list[dict[str, Any]]:
        raise NotImplementedError

    def is_correct(self, task: Task, text: str | None) -> bool:
        raise NotImplementedError

    def solution(self, task: Task) -> str | None:
        """A reply that the grader scores correct, built from the reference (None where none can
        be): what the tests and ``tracerl tasks check`` hold every grader to."""
        return None

    def reward(self, task: Task, text: str | None, turns: int = 1) -> float:
        return 1.0 if self.is_correct(task, text) else 0.0

    def rewards(self, task: Task, text: str | None, turns: int = 1) -> dict[str, Any]:
        """What the built-in agent returns: the reward and whether the answer is right."""
        return {"reward": self.reward(task, text, turns), "is_correct": self.is_correct(task, text)}

    def feedback(self, task: Task, text: str | None, turn: int) -> str | None:
        return None

    def tools(self, task: Task) -> list[dict[str, Any]] | None:
        return None

    def call_tool(self, task: Task, name: str, arguments: dict[str, Any]) -> str:
        return f"error: unknown tool {name!r}"

    # -- loading ---------------------------------------------------------------------------

    def declared(self) -> Any:
        """The dataset's declared schema (:class:`~tracerl.tasks.catalogue.schema.Declared`)."""
        from .catalogue.schema import declared

        return declared(self.hub.id)

    @property
    def shared_split(self) -> bool:
        """Whether both roles read one hub split (then split 80/20 by row hash)."""
        return len(set(self.splits.values())) < len(self.splits)

    def roles(self) -> list[tuple[str, str, int | None]]:
        """(role, hub split, declared rows of that hub split or None), train first."""
        sizes = self.declared().split_sizes(self.hub.configs)
        return [(role, split, sizes.get(split) or None) for role, split in sorted(self.splits.items(), reverse=True)]

    def hub_rows(self, hub_split: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
        """Every row of the hub's ``hub_split``, as loaded (no partition, no dedup)."""
        return load_rows(self.name, self.hub, hub_split, path)

    def rows(self, split: str, path: str | os.PathLike[str] | None = None,
             dedup: bool = True) -> list[dict[str, Any]]:
        """The rows of tracerl split ``split`` ("train" or "test"); "train" without the test
        problems of its domain's benchmarks unless ``dedup`` is False."""
        if split not in self.splits:
            have = ", ".join(sorted(self.splits))
            if split == "test":
                raise ConfigError(f"{self.name} has no 'test' split (it has: {have}): it is a training set; "
                                  "evaluate on another task with --eval-task NAME, or pass --eval-size 0")
            raise ConfigError(f"{self.name} has no {split!r} split (it has: {have}); "
                              f"it is an evaluation set, so train on another task")
        rows = self.hub_rows(self.splits[split], path)
        if self.shared_split:
            rows = [r for r in rows if in_test(self.row_id(r)) == (split == "test")]
        if split == "train" and dedup:
            from .dedup import drop_test_problems

            rows = drop_test_problems(self, rows, path)
        return rows

    def tasks(self, split: str, n: int, seed: int = 0, path: str | os.PathLike[str] | None = None) -> list[Task]:
        """``n`` tasks of ``split`` in a seeded order (see the module docstring)."""
        rows = self.rows(split, path)
        picked = seeded_draw(f"{self.name}:{split}:{seed}", len(rows), n, cycle=split == "train")
        if len(picked) < n:
            log.warning("%s: asked for %d %s tasks, the split has %d", self.name, n, split, len(picked))
        return [self.to_task(rows[i], split, e) for e, i in picked]

    def to_task(self, row: dict[str, Any], split: str, epoch: int = 0) -> Task:
        suffix = f"/e{epoch}" if epoch else ""
        return Task(id=f"{self.name}/{self.row_id(row)}{suffix}", data=dict(row),
                    answer=self.reference(row), dataset=self.name, split=split)
