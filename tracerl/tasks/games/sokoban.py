"""Sokoban, a multi-step text game: push every box ($) onto a target (.) in a walled room.

    # # # # # #
    # _ _ . _ #        the model replies "Move: left" (or up/down/right), sees the room after
    # _ $ _ _ #        its moves, and moves again, up to ``max_turns`` replies; walking into
    # _ @ _ _ #        a box pushes it, unless a wall or another box is behind it
    # # # # # #

Rooms are random but deterministic, and always solvable: each is made backwards from a solved
room by pulling the boxes away from their targets (as Gymnasium's and Boxoban's generators
do), then solved forwards by breadth-first search, whose shortest solution is the task's
reference. "train" and "test" never share a room (a room's split is a hash of its layout).

The reward is a pure function of the text: every "Move: <direction>" of all replies, replayed
in order from the start; 1.0 when all boxes stand on targets, else 0.0.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from tracerl.core.types import Task

from .base import TextGame
from .frozenlake import MOVES, parse_moves

SYSTEM_PROMPT = (
    "You play Sokoban. # is a wall, _ floor, @ you, $ a box, . a target, * a box on a target, + you on a "
    "target. Walking into a box pushes it one square if the square behind it is free. Push every box onto a "
    "target. End each reply with your moves, one per line: 'Move: up', 'Move: down', 'Move: left' or "
    "'Move: right'."
)
Cell = tuple[int, int]
State = tuple[Cell, frozenset[Cell]]  # the player, the boxes


def step(walls: frozenset[Cell], state: State, move: str) -> State:
    """The state after one move: walls stop the player; a box moves if the square behind is free."""
    (r, c), boxes = state
    dr, dc = MOVES[move]
    ahead = (r + dr, c + dc)
    if ahead in walls:
        return state
    if ahead in boxes:
        behind = (ahead[0] + dr, ahead[1] + dc)
        if behind in walls or behind in boxes:
            return state
        return ahead, (boxes - {ahead}) | {behind}
    return ahead, boxes


def solve(walls: frozenset[Cell], targets: frozenset[Cell], start: State, limit: int = 200_000) -> list[str] | None:
    """A shortest list of moves that puts every box on a target (BFS), or None."""
    previous: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    while queue and len(previous) < limit:
        state = queue.popleft()
        if state[1] == targets:
            moves: list[str] = []
            while previous[state] is not None:
                state, move = previous[state]  # type: ignore[misc]
                moves.append(move)
            return moves[::-1]
        for move in MOVES:
            nxt = step(walls, state, move)
            if nxt not in previous:
                previous[nxt] = (state, move)
                queue.append(nxt)
    return None


def generate(rng: random.Random, size: int, boxes: int, pulls: int, min_moves: int = 3) -> dict[str, Any]:
    """A ``size`` x ``size`` room (walls around) with ``boxes`` boxes off their targets, solvable
    in no fewer than ``min_moves`` moves."""
    inner = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
    walls = frozenset((r, c) for r in range(size) for c in range(size) if (r, c) not in inner)
    while True:
        targets = frozenset(rng.sample(inner, boxes))
        free = [cell for cell in inner if cell not in targets]
        player, placed = rng.choice(free), set(targets)
        for _ in range(pulls):  # pull: the player steps back and the box in front follows
            move = rng.choice(list(MOVES))
            dr, dc = MOVES[move]
            back = (player[0] - dr, player[1] - dc)
            if back in walls or back in placed:
                continue
            front = (player[0] + dr, player[1] + dc)
            if front in placed and rng.random() < 0.8:
                placed = (placed - {front}) | {player}
            player = back
        start = (player, frozenset(placed))
        if start[1] != targets:
            solution = solve(walls, targets, start)
            if solution and len(solution) >= min_moves:
                return {"size": size, "walls": sorted(walls), "targets": sorted(targets), "player": player,
                        "boxes": sorted(placed), "solution": solution}


def render(data: dict[str, Any], state: State) -> str:
    walls, targets = {_cell(w) for w in data["walls"]}, {_cell(t) for t in data["targets"]}
    player, boxes = state
    rows = []
    for r in range(data["size"]):
        row = []
        for c in range(data["size"]):
            cell = (r, c)
            on_target = cell in targets
            if cell in walls:
                row.append("#")
            elif cell in boxes:
                row.append("*" if on_target else "$")
            elif cell == player:
                row.append("+" if on_target else "@")
            else:
                row.append("." if on_target else "_")
        rows.append(" ".join(row))
    return "\n".join(rows)


def _cell(value: Any) -> Cell:
    # a room's cells arrive as lists once its data has crossed JSON (a span, a file)
    return int(value[0]), int(value[1])


def _start(data: dict[str, Any]) -> tuple[frozenset[Cell], frozenset[Cell], State]:
    walls = frozenset(_cell(w) for w in data["walls"])
    targets = frozenset(_cell(t) for t in data["targets"])
    return walls, targets, (_cell(data["player"]), frozenset(_cell(b) for b in data["boxes"]))


def play(data: dict[str, Any], moves: list[str]) -> tuple[bool, State]:
    """Replay ``moves`` from the start: (solved, final state); moves after solving are ignored."""
    walls, targets, state = _start(data)
    for move in moves:
        state = step(walls, state, move)
        if state[1] == targets:
            return True, state
    return False, state


class Sokoban(TextGame):
    """The game as a task: ``tasks``/``messages``/``reward``/``is_correct`` plus :meth:`observe`."""

    name = "sokoban"
    grader = "replays every 'Move: <dir>' of the replies; 1 when every box is on a target"
    description = "multi-step puzzle: push the box onto the target with 'Move: <dir>' replies (generated rooms)"

    def __init__(self, size: int = 6, boxes: int = 1, pulls: int = 12, max_turns: int = 10):
        self.size, self.boxes, self.pulls, self.max_turns = size, boxes, pulls, max_turns

    def _sample(self, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
        data = generate(rng, self.size, self.boxes, self.pulls)
        key = f"{data['player']}|{data['boxes']}|{data['targets']}"
        return key, data, data["solution"]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        board = render(task.data, _start(task.data)[2])
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"The room:\n{board}\nYour moves?"}]

    def observe(self, task: Task, transcript: str) -> tuple[str, bool]:
        """What the player sees after all moves in ``transcript``, and whether the game is over."""
        moves = parse_moves(transcript)
        solved, state = play(task.data, moves)
        if solved:
            return "Every box is on a target. You solved it!", True
        said = f"You made {len(moves)} moves so far." if moves else \
            "No move found; end your reply with lines like 'Move: left'."
        return f"{said}\n{render(task.data, state)}\nYour moves?", False

    def is_correct(self, task: Task, text: str | None) -> bool:
        return play(task.data, parse_moves(text))[0]

    def solution(self, task: Task) -> str:
        return "\n".join(f"Move: {m}" for m in task.answer)
