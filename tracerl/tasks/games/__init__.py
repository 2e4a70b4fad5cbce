"""Text games played over several turns, generated (no data needed): each reply's moves or
guesses are applied, and what the player sees next is the new user turn
(:func:`~tracerl.tasks.bench_agents.game_agent`). Rewards replay the whole transcript, so they
are pure functions of the text."""

from __future__ import annotations

from .frozenlake import FrozenLake
from .sokoban import Sokoban
from .wordle import Wordle

GAMES = (FrozenLake, Sokoban, Wordle)
