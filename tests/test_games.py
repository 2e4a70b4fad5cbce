"""The generated text games: Sokoban and Wordle (FrozenLake's tests are in test_task_benchmarks)."""

from __future__ import annotations

import pytest

from tracerl import tasks
from tracerl.tasks.games.sokoban import play, solve, step
from tracerl.tasks.games.wordle import GUESSES, WORDS, parse_guesses, score


@pytest.mark.parametrize("name", ["sokoban", "wordle", "frozenlake"])
def test_games_are_deterministic_split_disjoint_and_solved_by_their_reference(name):
    spec = tasks.get(name)
    train, again = spec.tasks("train", 40, seed=3), spec.tasks("train", 40, seed=3)
    assert [t.data for t in train] == [t.data for t in again]
    test = spec.tasks("test", 40, seed=3)
    assert not {repr(sorted(t.data.items())) for t in train} & {repr(sorted(t.data.items())) for t in test}
    for task in train + test:
        assert spec.reward(task, spec.source.solution(task)) == 1.0
        assert spec.reward(task, None) == 0.0 and spec.reward(task, "I give up.") == 0.0
    assert spec.domain == "games" and spec.default_agent.endswith(":game_agent")


def _room():
    # # # # #
    # @ $ . #      the box is pushed right onto the target
    # _ _ _ #
    # _ _ _ #
    # # # # #
    walls = [(r, c) for r in range(5) for c in range(5) if r in (0, 4) or c in (0, 4)]
    return {"size": 5, "walls": walls, "targets": [(1, 3)], "player": (1, 1), "boxes": [(1, 2)], "solution": ["right"]}


def test_sokoban_pushes_boxes_and_walls_stop_them():
    room = _room()
    walls = frozenset(tuple(w) for w in room["walls"])
    start = ((1, 1), frozenset({(1, 2)}))
    assert step(walls, start, "right") == ((1, 2), frozenset({(1, 3)}))
    assert step(walls, start, "up") == start  # a wall
    stuck = ((1, 2), frozenset({(1, 3)}))
    assert step(walls, stuck, "right") == stuck  # the box cannot go through the wall
    assert solve(walls, frozenset({(1, 3)}), start) == ["right"]
    assert play(room, ["right"])[0] and not play(room, ["down", "right"])[0]
    task = tasks.get("sokoban").tasks("train", 1)[0].model_copy(update={"data": room, "answer": ["right"]})
    game = tasks.get("sokoban").source
    assert game.reward(task, "I push it.\nMove: right") == 1.0
    observation, done = game.observe(task, "Move: down")
    assert not done and "# @ _ _ #" in observation and "You made 1 moves" in observation
    assert game.observe(task, "Move: right") == ("Every box is on a target. You solved it!", True)


def test_wordle_scores_letters_as_the_game_does():
    assert score("crane", "crane") == "CRANE"
    assert score("apple", "papal") == "paP_l"  # one 'a' in the word: the second is not in it
    assert score("abbey", "babes") == "baBE_"
    assert score("crane", "nanny") == "_a_N_"  # one 'n': the one in place takes it
    assert parse_guesses("Hmm. **Guess:** Crane\nguess: slate, Guess: toolong") == ["crane", "slate"]
    assert len(WORDS) > 400 and all(len(w) == 5 and w.isalpha() for w in WORDS)


def test_wordle_allows_six_guesses_and_shows_the_board():
    spec = tasks.get("wordle")
    task = spec.tasks("test", 1)[0].model_copy(update={"data": {"secret": "crane"}, "answer": "crane"})
    misses = "\n".join(f"Guess: {w}" for w in ["about", "alike", "build", "cheap", "dance", "eager"])
    assert spec.reward(task, misses + "\nGuess: crane") == 0.0  # the seventh is too late
    assert spec.reward(task, "Guess: about\nGuess: crane") == 1.0
    observation, done = spec.source.observe(task, "Guess: trace")
    assert not done and "trace -> _RAcE" in observation and f"{GUESSES - 1} guesses left" in observation
    assert spec.source.observe(task, misses) == ("Out of guesses. The word was crane.", True)
