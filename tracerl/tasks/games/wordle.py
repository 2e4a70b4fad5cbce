"""Wordle, a multi-turn word game: find a hidden five-letter word in six guesses.

The model replies "Guess: crane"; each guess is answered letter by letter, as the game does
(a letter in the right place, in the word elsewhere, or not in the word; a repeated letter
is marked "elsewhere" only as often as the word has it). Any five letters are a valid guess:
no dictionary is checked. The secret words are ~480 common English words; "train" and
"test" never share one (a word's split is a hash of the word).

The reward is a pure function of the text: the "Guess: <word>" lines of all replies, in
order; 1.0 when one of the first six is the word, else 0.0.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

from tracerl.core.types import Task

from .base import TextGame

GUESSES = 6
SYSTEM_PROMPT = (
    "You play Wordle: find the hidden five-letter English word in six guesses. After each guess you see "
    "each letter marked: UPPER case = right letter, right place; lower case = in the word, elsewhere; "
    "_ = not in the word. End each reply with one guess: 'Guess: <word>'."
)
_GUESS = re.compile(r"guess\s*:?\s*\**\s*([a-z]{5})\b", re.IGNORECASE)
_WORD_LIST = """
reads about above actor acute admit adopt adult after again agent agree ahead alarm album
alert alike alive allow alone along alter among anger angle angry apart apple apply arena
argue arise array aside asset audio audit avoid award aware badly baker bases basic basis
beach began begin begun being below bench birth black blame blind block blood board boost
booth bound brain brand bread break breed brief bring broad broke brown build built buyer
cable carry catch cause chain chair chart chase cheap check chest chief child chose civil
claim class clean clear click clock close coach coast could count court cover craft crash
cream crime cross crowd crown curve cycle daily dance dated dealt death debut delay depth
doing doubt dozen draft drama drawn dream dress drill drink drive drove dying eager early
earth eight elite empty enemy enjoy enter entry equal error event every exact exist extra
faith false fault fiber field fifth fifty fight final first fixed flash fleet floor fluid
focus force forth forty forum found frame frank fraud fresh front fruit fully funny giant
given glass globe going grace grade grand grant grass great green gross group grown guard
guess guest guide happy heart heavy hence horse hotel house human ideal image index inner
input issue joint judge known label large laser later laugh layer learn lease least leave
legal level light limit links lives local logic loose lower lucky lunch lying magic major
maker march match maybe mayor meant media metal might minor minus mixed model money month
moral motor mount mouse mouth movie music needs never newly night noise north noted novel
nurse occur ocean offer often order other ought paint panel paper party peace phase phone
photo piece pilot pitch place plain plane plant plate point pound power press price pride
prime print prior prize proof proud prove queen quick quiet quite radio raise range rapid
ratio reach ready refer right rival river rough round route royal rural scale scene scope
score sense serve seven shall shape share sharp sheet shelf shell shift shirt shock shoot
short shown sight since sixth sixty sized skill sleep slide small smart smile smoke solid
solve sorry sound south space spare speak speed spend spent split spoke sport staff stage
stake stand start state steam steel stick still stock stone stood store storm story strip
stuck study stuff style sugar suite super sweet table taken taste taxes teach teeth thank
theft their theme there these thick thing think third those three threw throw tight times
tired title today topic total touch tough tower track trade train treat trend trial tried
tries truck truly trust truth twice under union unity until upper upset urban usage usual
valid value video virus visit vital voice waste watch water wheel where which while white
whole whose woman women world worry worse worst worth would wound write wrong wrote yield
young youth
"""
WORDS = tuple(_WORD_LIST.split())


def parse_guesses(text: str | None) -> list[str]:
    """Every "Guess: <five letters>" in ``text``, in order, lower-cased."""
    return [g.lower() for g in _GUESS.findall(text or "")]


def score(secret: str, guess: str) -> str:
    """The game's answer to ``guess``: "cR_n_" style (see the system prompt)."""
    marks = ["_"] * 5
    left = Counter(s for s, g in zip(secret, guess) if s != g)
    for i, (s, g) in enumerate(zip(secret, guess)):
        if s == g:
            marks[i] = g.upper()
        elif left[g] > 0:
            marks[i] = g
            left[g] -= 1
    return "".join(marks)


class Wordle(TextGame):
    """The game as a task: ``tasks``/``messages``/``reward``/``is_correct`` plus :meth:`observe`."""

    name = "wordle"
    grader = "the 'Guess: <word>' lines of the replies; 1 when one of the first six is the hidden word"
    description = "multi-turn word game: find the hidden five-letter word in six guesses"
    max_turns = GUESSES

    def _sample(self, rng: random.Random) -> tuple[str, dict[str, Any], str]:
        word = rng.choice(WORDS)
        return word, {"secret": word}, word

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": "Guess the hidden five-letter word. Your first guess?"}]

    def observe(self, task: Task, transcript: str) -> tuple[str, bool]:
        """What the player sees after all guesses in ``transcript``, and whether the game is over."""
        guesses = parse_guesses(transcript)[:GUESSES]
        secret = task.data["secret"]
        if secret in guesses:
            return f"{secret.upper()}: you found the word!", True
        if len(guesses) == GUESSES:
            return f"Out of guesses. The word was {secret}.", True
        if not guesses:
            return "No guess found; end your reply with 'Guess: <word>'.", False
        board = "\n".join(f"{g} -> {score(secret, g)}" for g in guesses)
        return f"{board}\n{GUESSES - len(guesses)} guesses left. Your next guess?", False

    def is_correct(self, task: Task, text: str | None) -> bool:
        return task.data["secret"] in parse_guesses(text)[:GUESSES]

    def solution(self, task: Task) -> str:
        return f"Guess: {task.data['secret']}"
