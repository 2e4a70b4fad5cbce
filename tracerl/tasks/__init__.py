"""Task registry: name -> loader, prompt builder, reward function and default agent.

    spec = tracerl.tasks.get("arithmetic")
    tasks = spec.tasks("train", 100, seed=0)      # list[Task]; "test" is the held-out split
    spec.reward(task, "The answer is 5.")         # 1.0 or 0.0

The default agent of a task is a rollout function (``module:fn``) the trainer and
``tracerl eval`` use when no ``--agent`` is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracerl.core.errors import ConfigError

from .synthetic import TASKS, SyntheticTask


@dataclass(frozen=True)
class TaskSpec:
    """One registered task: the synthetic-task object plus the agent that solves it by default."""

    name: str
    source: SyntheticTask
    default_agent: str
    description: str

    def tasks(self, split: str, n: int, seed: int = 0) -> list[Any]:
        return self.source.tasks(split, n, seed)  # type: ignore[arg-type]

    def reward(self, task: Any, text: str | None, turns: int = 1) -> float:
        return self.source.reward(task, text, turns)


_AGENT = "tracerl.tasks.agents:math_agent"
REGISTRY: dict[str, TaskSpec] = {
    "arithmetic": TaskSpec("arithmetic", TASKS["arithmetic"], _AGENT,
                           "a op b on small integers; a calculator tool is offered"),
    "countdown": TaskSpec("countdown", TASKS["countdown"], _AGENT,
                          "reach a target from 3-4 numbers with + - * and parentheses"),
    "multiturn": TaskSpec("multiturn", TASKS["multiturn"], _AGENT,
                          "arithmetic with 'Wrong, try again.' feedback, up to 3 turns"),
}


def get(name: str) -> TaskSpec:
    """The registered task ``name``; a ConfigError lists the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(f"unknown task {name!r}; known tasks: {known}") from None


def names() -> list[str]:
    return sorted(REGISTRY)
