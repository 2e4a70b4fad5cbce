"""FrozenLake, a multi-step text game: walk from S to G across frozen tiles (F) around holes (H).

    S F F F
    F H F H        the model replies "Move: right" (or up/down/left), sees the new board,
    F F F H        and moves again, up to ``max_turns`` replies
    H F F G

Maps are random but deterministic: task ``i`` of ``tasks(split, n, seed)`` is always the same
map, every map has a path from S to G (checked by BFS), and "train" and "test" never share a
map (a map's split is a hash of its layout). Moves off the board leave the player in place
(as in Gymnasium's FrozenLake, without the slippery ice).

The reward is a pure function of the text: :meth:`FrozenLake.reward` replays every
"Move: <direction>" in order (all the model's replies joined) from S; 1.0 when a move lands on
G, 0.0 when one falls in a hole or the moves run out first. Moves after the end are ignored.
"""

from __future__ import annotations

import random
import re
from collections import deque
from typing import Any, Literal

from tracerl.core.types import Task

from .base import TextGame

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_MOVE = re.compile(r"move\s*:?\s*\**\s*(up|down|left|right)\b", re.IGNORECASE)
SYSTEM_PROMPT = (
    "You play FrozenLake on a grid. P is you, G the goal, H a hole (falling in ends the game), "
    "F frozen ground. Reach G. Each reply ends with one move: 'Move: up', 'Move: down', "
    "'Move: left' or 'Move: right'."
)
Outcome = Literal["goal", "hole", "playing"]


def generate(rng: random.Random, size: int, p_hole: float) -> list[str]:
    """A ``size`` x ``size`` map with S top-left, G bottom-right and a path between them."""
    while True:
        cells = [["H" if rng.random() < p_hole else "F" for _ in range(size)] for _ in range(size)]
        cells[0][0], cells[-1][-1] = "S", "G"
        grid = ["".join(row) for row in cells]
        if shortest_path(grid) is not None:
            return grid


def shortest_path(grid: list[str]) -> list[str] | None:
    """The moves of one shortest path from S to G (BFS), or None if G cannot be reached."""
    size = len(grid)
    start = (0, 0)
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if grid[cell[0]][cell[1]] == "G":
            path: list[str] = []
            while previous[cell] is not None:
                cell, move = previous[cell]  # type: ignore[misc]
                path.append(move)
            return path[::-1]
        for move, (dr, dc) in MOVES.items():
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < size and 0 <= c < size and grid[r][c] != "H" and (r, c) not in previous:
                previous[(r, c)] = (cell, move)
                queue.append((r, c))
    return None


def parse_moves(text: str | None) -> list[str]:
    """Every "Move: <direction>" in ``text``, in order, lower-cased."""
    return [m.lower() for m in _MOVE.findall(text or "")]


def play(grid: list[str], moves: list[str]) -> tuple[Outcome, tuple[int, int], int]:
    """Replay ``moves`` from S: (outcome, final position, moves used until the game ended)."""
    size, (r, c) = len(grid), (0, 0)
    for used, move in enumerate(moves, 1):
        dr, dc = MOVES[move]
        r, c = min(max(r + dr, 0), size - 1), min(max(c + dc, 0), size - 1)
        if grid[r][c] == "G":
            return "goal", (r, c), used
        if grid[r][c] == "H":
            return "hole", (r, c), used
    return "playing", (r, c), len(moves)


def render(grid: list[str], position: tuple[int, int]) -> str:
    rows = [list(row) for row in grid]
    rows[position[0]][position[1]] = "P"
    return "\n".join(" ".join(row) for row in rows)


class FrozenLake(TextGame):
    """The game as a task: ``tasks``/``messages``/``reward``/``is_correct`` plus :meth:`observe`."""

    name = "frozenlake"
    grader = "replays every 'Move: <dir>' of the replies; 1 when a move lands on G"
    description = "multi-step grid game: reach G around holes with 'Move: <dir>' replies; reward 1 at G"

    def __init__(self, size: int = 4, p_hole: float = 0.2, max_turns: int = 12):
        self.size, self.p_hole, self.max_turns = size, p_hole, max_turns

    def _sample(self, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
        grid = generate(rng, self.size, self.p_hole)
        return "/".join(grid), {"grid": grid, "size": self.size}, shortest_path(grid) or []

    def messages(self, task: Task) -> list[dict[str, Any]]:
        board = render(task.data["grid"], (0, 0))
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"The board:\n{board}\nYour move?"}]

    def observe(self, task: Task, transcript: str) -> tuple[str, bool]:
        """What the player sees after all moves in ``transcript``, and whether the game is over."""
        moves = parse_moves(transcript)
        outcome, position, _used = play(task.data["grid"], moves)
        if outcome == "goal":
            return "You reached the goal!", True
        if outcome == "hole":
            return "You fell into a hole. Game over.", True
        last = f"You moved {moves[-1]}." if moves else "No move found; end your reply with 'Move: <direction>'."
        return f"{last}\n{render(task.data['grid'], position)}\nYour move?", False

    def is_correct(self, task: Task, text: str | None) -> bool:
        return play(task.data["grid"], parse_moves(text))[0] == "goal"

    def solution(self, task: Task) -> str:
        return "\n".join(f"Move: {m}" for m in task.answer)
