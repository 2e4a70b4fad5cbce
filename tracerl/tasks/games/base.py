"""What every generated text game has: seeded, split-disjoint tasks and a reward that replays the text."""

from __future__ import annotations

import random
from typing import Any

from tracerl.core.types import Task

from ..synthetic import _draw


class TextGame:
    """A game as a task: subclasses give ``_sample`` (a new game), ``messages``, ``observe``
    (what the player sees after a transcript, and whether the game is over), ``is_correct`` and
    ``solution``; the reward is 1.0 exactly when the whole transcript wins."""

    name = ""
    domain = "games"
    grader = ""
    description = ""
    tool_names: tuple[str, ...] = ()
    default_agent = "tracerl.tasks.bench_agents:game_agent"
    max_turns = 10

    def _sample(self, rng: random.Random) -> tuple[str, dict[str, Any], Any]:
        """A new game: (its key, which decides its split; its data; its reference answer)."""
        raise NotImplementedError

    def tasks(self, split: str, n: int, seed: int = 0) -> list[Task]:
        drawn = _draw(self.name, split, n, seed, self._sample)  # type: ignore[arg-type]
        return [Task(id=f"{self.name}/{split}/{seed}/{i}", data=data, answer=answer, dataset=self.name, split=split)
                for i, (_key, data, answer) in enumerate(drawn)]

    def is_correct(self, task: Task, text: str | None) -> bool:
        raise NotImplementedError

    def reward(self, task: Task, text: str | None, turns: int = 1) -> float:
        return 1.0 if self.is_correct(task, text) else 0.0

    def feedback(self, task: Task, text: str | None, turn: int) -> str | None:
        return None
