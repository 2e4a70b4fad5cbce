"""Task registry: name -> loader, prompt builder, reward function and default agent.

    spec = tracerl.tasks.get("arithmetic")
    tasks = spec.tasks("train", 100, seed=0)      # list[Task]; "test" is the held-out split
    spec.messages(tasks[0])                       # the OpenAI chat prompt
    spec.reward(task, "The answer is 5.")         # 1.0 or 0.0
    spec.is_correct(task, "The answer is 5.")     # True / False

The default agent of a task is a rollout function (``module:fn``) the trainer and
``tracerl eval`` use when no ``--agent`` is given.

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

from .benchmarks import AIME, GSM8K, MATH500, CountdownHub, FinQA, HendrycksMath
from .coding import MBPP, HumanEval
from .frozenlake import FrozenLake
from .hotpotqa import HotpotQA
from .synthetic import TASKS


@dataclass(frozen=True)
class TaskSpec:
    """One registered task: the task object (``source``) plus its default agent.

    ``source`` is a synthetic task, a :class:`~tracerl.tasks.benchmarks.Benchmark` or the
    FrozenLake game; all have ``tasks``/``messages``/``reward``/``is_correct``/``feedback``.
    """

    name: str
    source: Any  # a SyntheticTask, a Benchmark or the FrozenLake game (duck-typed, as above)
    default_agent: str
    description: str

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


_AGENT = "tracerl.tasks.agents:math_agent"
REGISTRY: dict[str, TaskSpec] = {
    "arithmetic": TaskSpec("arithmetic", TASKS["arithmetic"], _AGENT,
                           "a op b on small integers; a calculator tool is offered"),
    "countdown": TaskSpec("countdown", TASKS["countdown"], _AGENT,
                          "reach a target from 3-4 numbers with + - * and parentheses (synthetic)"),
    "multiturn": TaskSpec("multiturn", TASKS["multiturn"], _AGENT,
                          "arithmetic with 'Wrong, try again.' feedback, up to 3 turns"),
}
for _source in (GSM8K(), MATH500(), HendrycksMath(), AIME(), FinQA(), CountdownHub(), HumanEval(), MBPP(),
                HotpotQA(), FrozenLake()):
    REGISTRY[_source.name] = TaskSpec(_source.name, _source, _source.default_agent, _source.description)
del _source


def get(name: str) -> TaskSpec:
    """The registered task ``name``; a ConfigError lists the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(f"unknown task {name!r}; known tasks: {known}") from None


def names() -> list[str]:
    return sorted(REGISTRY)
