"""Task registry: name -> loader, prompt builder, reward function and default agent.

    spec = tracerl.tasks.get("arithmetic")
    tasks = spec.tasks("train", 100, seed=0)      # list[Task]; "test" is the held-out split
    spec.messages(tasks[0])                       # the OpenAI chat prompt
    spec.reward(task, "The answer is 5.")         # 1.0 or 0.0
    spec.is_correct(task, "The answer is 5.")     # True / False

The default agent of a task is a rollout function (``module:fn``) the trainer and
``tracerl eval`` use when no ``--agent`` is given.

Your own tasks: ``tracerl train --data tasks.jsonl --agent app.py:solve --reward math`` reads
them with :func:`~.data.load_tasks` (files, dataset folders, ``hf:`` ids, functions);
:func:`register` gives them a name a team can share.

Tasks:

* synthetic, generated (no data needed): ``arithmetic``, ``countdown``, ``multiturn``; and
  ``frozenlake``, a multi-step grid game (:mod:`.frozenlake`).
* real benchmarks (:mod:`.benchmarks`, :mod:`.coding`, :mod:`.hotpotqa`), loaded from a local
  file/folder (``path=`` or ``$TRACERL_DATA_DIR/<name>/``) or the Hugging Face Hub
  (``pip install 'tracerl[tasks]'``), see :mod:`.loaders`: ``gsm8k``, ``math500``,
  ``hendrycks_math``, ``aime``, ``finqa``, ``countdown-hub``, ``humaneval``, ``mbpp``,
  ``hotpotqa``. The hub Countdown is ``countdown-hub`` because ``countdown`` is the synthetic
  one the bundled tiny model is trained on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tracerl.core.errors import ConfigError
from tracerl.core.types import Task

from .catalogue import benchmarks as _catalogue
from .data import DataConfig, UserTasks, load_data, load_tasks, rows_to_tasks, split_tasks
from .games import GAMES
from .synthetic import TASKS
from .terminal import BuiltinTerminalTasks


@dataclass(frozen=True)
class TaskSpec:
    """One registered task: the task object (``source``) plus its default agent.

    ``source`` is a synthetic task, a :class:`~tracerl.tasks.benchmarks.Benchmark` or the
    FrozenLake game; all have ``tasks``/``messages``/``reward``/``is_correct``/``feedback``.
    """

    name: str
    source: Any  # a SyntheticTask, a Benchmark, the FrozenLake game or UserTasks (duck-typed)
    default_agent: str
    description: str
    default_reward: Any = None  # the reward function (a spec or a callable) when no --reward is given

    def tasks(self, split: str, n: int, seed: int = 0, path: str | os.PathLike[str] | None = None) -> list[Any]:
        """``n`` tasks of ``split``; ``path`` is local data for a real benchmark (see loaders)."""
        if path is None:
            return self.source.tasks(split, n, seed)
        if not hasattr(self.source, "rows"):
            raise ConfigError(f"{self.name} is generated, it reads no data; drop path={path!r}")
        return self.source.tasks(split, n, seed, path=path)

    def messages(self, task: Any) -> list[dict[str, Any]]:
        return self.source.messages(task)

    def reward(self, task: Any, text: str | None, turns: int = 1) -> float:
        return self.source.reward(task, text, turns)

    def is_correct(self, task: Any, text: str | None) -> bool:
        return bool(self.source.is_correct(task, text))

    def feedback(self, task: Any, text: str | None, turn: int) -> str | None:
        return self.source.feedback(task, text, turn)

    def tools(self, task: Any) -> list[dict[str, Any]] | None:
        return self.source.tools(task) if hasattr(self.source, "tools") else None

    def call_tool(self, task: Any, name: str, arguments: dict[str, Any]) -> str:
        if hasattr(self.source, "call_tool"):
            return self.source.call_tool(task, name, arguments)
        return f"error: {self.name} has no tools"

    @property
    def max_turns(self) -> int:
        return self.source.max_turns

    @property
    def domain(self) -> str:
        """The catalogue's domain (math, code, ...); "synthetic" for generated tasks, "user" for
        the user's own."""
        if isinstance(self.source, UserTasks):
            return "user"
        return getattr(self.source, "domain", None) or "synthetic"


_AGENT = "tracerl.tasks.agents:math_agent"
REGISTRY: dict[str, TaskSpec] = {
    "arithmetic": TaskSpec("arithmetic", TASKS["arithmetic"], _AGENT,
                           "a op b on small integers; a calculator tool is offered"),
    "calculator": TaskSpec("calculator", TASKS["calculator"], _AGENT,
                           "two-digit + and -, a calculator tool offered: RL teaches the tiny model to call it"),
    "countdown": TaskSpec("countdown", TASKS["countdown"], _AGENT,
                          "reach a target from 3-4 numbers with + - * and parentheses (synthetic)"),
    "multiturn": TaskSpec("multiturn", TASKS["multiturn"], _AGENT,
                          "arithmetic with 'Wrong, try again.' feedback, up to 3 turns"),
}
for _source in (*_catalogue(), *(game() for game in GAMES), BuiltinTerminalTasks()):
    REGISTRY[_source.name] = TaskSpec(_source.name, _source, _source.default_agent, _source.description)
del _source


DATA_AGENT = "tracerl.tasks.agents:question_agent"


def register(name: str, tasks: Any, *, eval_tasks: Any = None, holdout: float = 0.0, reward: Any = None,
             agent: str | None = None, description: str = "", answer: str | None = "answer",
             columns: dict[str, str] | None = None, replace: bool = False) -> TaskSpec:
    """Register ``name`` so ``tracerl train NAME`` / ``tracerl eval NAME`` (and ``TrainConfig(
    task=NAME)``) run it, e.g. a team's shared task in its own package::

        tracerl.tasks.register("support-tickets", "data/tickets.jsonl", holdout=0.1,
                               reward="exact", agent="myapp.agent:solve")

    ``tasks``: a source :func:`~tracerl.tasks.data.load_tasks` reads, or a list of Tasks or
    rows; ``eval_tasks`` the same for the held-out split (else ``holdout`` of the rows, by
    row hash). ``reward``: the default reward function (a built-in grader's name, a
    ``module:fn`` spec or a callable); ``agent``: the default rollout function (default: one
    chat turn with the row's ``question``). A name already taken is an error unless
    ``replace``."""
    if name in REGISTRY and not replace:
        raise ConfigError(f"task {name!r} is already registered; pick another name or pass replace=True")
    cfg = DataConfig(path=tasks if isinstance(tasks, str) else "<tasks>", holdout=holdout, answer=answer,
                     columns=columns or {})
    train = _tasks_of(tasks, cfg, name)
    held = _tasks_of(eval_tasks, cfg, name) if eval_tasks is not None else None
    train, test = split_tasks(train, cfg, held)
    spec = TaskSpec(name, UserTasks(name, train, test), agent or DATA_AGENT, description or f"{len(train)} tasks",
                    reward)
    REGISTRY[name] = spec
    return spec


def _tasks_of(source: Any, cfg: DataConfig, name: str) -> list[Any]:
    options: dict[str, Any] = {"answer": cfg.answer, "columns": cfg.columns, "name": name}
    if isinstance(source, (str, os.PathLike)):
        return load_tasks(source, **options)
    rows = list(source)
    if rows and all(isinstance(t, Task) for t in rows):
        return [t.model_copy(update={"dataset": name}) for t in rows]
    return rows_to_tasks(rows, f"task {name!r}", **options)


def from_data(cfg: DataConfig, name: str = "data") -> TaskSpec:
    """The task a run's ``--data`` makes (not registered)."""
    train, test = load_data(cfg)
    named = [t.model_copy(update={"dataset": name}) for t in train]
    held = [t.model_copy(update={"dataset": name}) for t in test]
    return TaskSpec(name, UserTasks(name, named, held), DATA_AGENT, f"{len(train)} tasks from {cfg.path}")


def get(name: str) -> TaskSpec:
    """The registered task ``name``; a ConfigError lists the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(REGISTRY), n=3, cutoff=0.6)
        guess = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ConfigError(f"unknown task {name!r}{guess} (tracerl tasks list shows all {len(REGISTRY)})") from None


def names() -> list[str]:
    return sorted(REGISTRY)
