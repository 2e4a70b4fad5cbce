"""Four synthetic tasks the bundled tiny policy is trained on, and RL then improves.

* ``arithmetic``: "What is 7 + 5?" -> "The answer is 12." (+, - and * on single digits).
* ``calculator``: "What is 37 + 45?" (+ and - on two-digit numbers), with the calculator tool
  offered: from memory the tiny model gets a minority right, through the tool nearly all, so
  what RL can teach here is to call the tool. About 12,000 distinct problems, so a demo never
  repeats one and the held-out split has thousands.
* ``countdown``: make a target from 3-4 small numbers with + - * and parentheses, each
  number at most once -> "The answer is (3 + 4) * 2."
* ``multiturn``: arithmetic where a wrong answer is met with "Wrong, try again." (up to
  three turns); the reward is discounted by the turns used.

Every task has a deterministic generator ``tasks(split, n, seed)`` whose "train" and "test"
splits are disjoint by construction: a problem's split is a hash of the problem itself, so
no seed can put a test problem in the training data. Pure Python, no torch.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal, Protocol

from tracerl.core.errors import TracerlError
from tracerl.core.types import Task

Split = Literal["train", "test"]

# Short on purpose: it is in every prompt, and the bundled tiny model is trained on exactly it.
SYSTEM_PROMPT = "End your reply with: The answer is <answer>."
FEEDBACK = "Wrong, try again."
TEST_FRACTION = 0.2

CALCULATOR_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate + - * and parentheses on integers.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}


# ---------------------------------------------------------------------------- parsing


class ExpressionError(TracerlError, ValueError):
    """An expression is not a well-formed integer expression over + - * ( )."""


_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")
_MAX_EXPR_CHARS = 200


def evaluate(expression: str, *, allow_unary_minus: bool = True) -> tuple[int, list[int]]:
    """Evaluate ``expression`` safely (no ``eval``): returns (value, numbers it uses, in order).

    Grammar: expr := term (("+"|"-") term)*; term := factor ("*" factor)*;
    factor := INT | "(" expr ")" | "-" factor (unary minus only if allowed).
    """
    if len(expression) > _MAX_EXPR_CHARS:
        raise ExpressionError(f"expression longer than {_MAX_EXPR_CHARS} characters")
    tokens: list[str] = []
    for number, other in _TOKEN.findall(expression.strip()):
        if number:
            if len(number) > 12:
                raise ExpressionError(f"number too long: {number[:20]}")
            tokens.append(number)
        elif other in "+-*()":
            tokens.append(other)
        elif not other.isspace():
            raise ExpressionError(f"unexpected character {other!r}")
    numbers: list[int] = []
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ExpressionError("unexpected end of expression")
        pos += 1
        return tokens[pos - 1]

    def factor() -> int:
        tok = take()
        if tok.isdigit():
            numbers.append(int(tok))
            return int(tok)
        if tok == "(":
            value = expr()
            if take() != ")":
                raise ExpressionError("missing ')'")
            return value
        if tok == "-" and allow_unary_minus:
            return -factor()
        raise ExpressionError(f"unexpected {tok!r}")

    def term() -> int:
        value = factor()
        while peek() == "*":
            take()
            value *= factor()
        return value

    def expr() -> int:
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    value = expr()
    if pos != len(tokens):
        raise ExpressionError(f"unexpected {tokens[pos]!r}")
    return value, numbers


def calculator(expression: str) -> str:
    """The ``calculator`` tool: the value as text, or ``"error: ..."`` (never raises)."""
    try:
        return str(evaluate(expression)[0])
    except ExpressionError as exc:
        return f"error: {exc}"


_ANSWER = re.compile(r"the answer is[ \t]*([^\n]*?)[ \t]*\.?[ \t]*$", re.IGNORECASE | re.MULTILINE)


def extract_answer(text: str | None) -> str | None:
    """The text after the last "The answer is" on its line, less a final period; else None."""
    found = _ANSWER.findall(text or "")
    return found[-1] if found and found[-1] else None


def _in_test(key: str) -> bool:
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:4], "big") < TEST_FRACTION * 2**32


def _draw(name: str, split: Split, n: int, seed: int, sample) -> list[tuple[str, dict[str, Any], Any]]:
    """Draw ``n`` problems of ``split`` with ``sample(rng) -> (key, data, answer)``.

    Problems are distinct while the split has unseen ones within 100 draws.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    rng = random.Random(f"{name}:{split}:{seed}")
    out: list[tuple[str, dict[str, Any], Any]] = []
    seen: set[str] = set()
    while len(out) < n:
        for _ in range(100):
            key, data, answer = sample(rng)
            while _in_test(key) != (split == "test"):
                key, data, answer = sample(rng)
            if key not in seen:
                break
        seen.add(key)
        out.append((key, data, answer))
    return out


# ---------------------------------------------------------------------------- tasks


class SyntheticTask(Protocol):
    name: str
    max_turns: int

    @property
    def tool_names(self) -> tuple[str, ...]: ...
    def tools(self, task: Task) -> list[dict[str, Any]] | None: ...
    def tasks(self, split: Split, n: int, seed: int = 0) -> list[Task]: ...
    def messages(self, task: Task) -> list[dict[str, Any]]: ...
    def reward(self, task: Task, text: str | None, turns: int = 1) -> float: ...
    def rewards(self, task: Task, text: str | None, turns: int = 1) -> dict[str, Any]: ...
    def feedback(self, task: Task, text: str | None, turn: int) -> str | None: ...


def _sample_arithmetic(rng: random.Random) -> tuple[str, dict[str, Any], int]:
    # Single digits: the bundled model learns these (two-digit sums stay near 10%).
    op = rng.choices("+-*", weights=(40, 35, 25))[0]
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    if op == "-":
        a, b = max(a, b), min(a, b)
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    problem = f"{a} {op} {b}"
    return problem, {"question": f"What is {problem}?", "expression": problem}, answer


class Arithmetic:
    """``a op b`` with small integers; the answer is an int."""

    name = "arithmetic"
    max_turns = 1
    # rng -> (the problem's key, which decides its split; its data; its answer)
    sample: Callable[[random.Random], tuple[str, dict[str, Any], Any]] = staticmethod(_sample_arithmetic)
    offered_tools: tuple[dict[str, Any], ...] = (CALCULATOR_TOOL,)  # what the agent offers the model

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The offered tools' names (``tracerl tasks show``, the catalogue's table)."""
        return tuple(tool["function"]["name"] for tool in self.offered_tools)

    def tools(self, task: Task) -> list[dict[str, Any]] | None:
        """The tool definitions the agent sends with each call (None: no tools)."""
        return list(self.offered_tools) or None

    def tasks(self, split: Split, n: int, seed: int = 0) -> list[Task]:
        drawn = _draw(self.name, split, n, seed, self.sample)
        return [
            Task(id=f"{self.name}/{split}/{seed}/{i}", data=data, answer=answer, dataset=self.name, split=split)
            for i, (_key, data, answer) in enumerate(drawn)
        ]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        """The chat prompt agents send: ``SYSTEM_PROMPT``, then the question."""
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.data["question"]},
        ]

    def is_correct(self, task: Task, text: str | None) -> bool:
        answer = extract_answer(text)
        return answer is not None and re.fullmatch(r"-?\d+", answer) is not None and int(answer) == task.answer

    def reward(self, task: Task, text: str | None, turns: int = 1) -> float:
        return 1.0 if self.is_correct(task, text) else 0.0

    def rewards(self, task: Task, text: str | None, turns: int = 1) -> dict[str, Any]:
        """What an agent returns: the reward, whether the answer is right, and whether there
        was an answer to read at all (``answer_found``: ``tracerl diagnose`` tells a format
        failure from a wrong answer by it)."""
        return {"reward": self.reward(task, text, turns), "is_correct": self.is_correct(task, text),
                "answer_found": float(extract_answer(text) is not None)}

    def feedback(self, task: Task, text: str | None, turn: int) -> str | None:
        return None


def _sample_two_digit(rng: random.Random) -> tuple[str, dict[str, Any], int]:
    op = rng.choice("+-")
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    if op == "-":
        a, b = max(a, b), min(a, b)
    answer = a + b if op == "+" else a - b
    problem = f"{a} {op} {b}"
    return problem, {"question": f"What is {problem}?", "expression": problem}, answer


class Calculator(Arithmetic):
    """``a + b`` / ``a - b`` on two-digit numbers; agents offer the calculator tool."""

    name = "calculator"
    sample = staticmethod(_sample_two_digit)


class MultiTurn(Arithmetic):
    """Arithmetic with retries: a wrong answer gets ``FEEDBACK`` until ``max_turns``.

    reward = ``discount ** (turns - 1)`` if the last answer is right, else 0.
    """

    name = "multiturn"
    max_turns = 3
    offered_tools = ()  # feedback turns instead of a tool
    discount = 0.8

    def reward(self, task: Task, text: str | None, turns: int = 1) -> float:
        return self.discount ** (max(turns, 1) - 1) if self.is_correct(task, text) else 0.0

    def feedback(self, task: Task, text: str | None, turn: int) -> str | None:
        return None if self.is_correct(task, text) or turn >= self.max_turns else FEEDBACK


def _sample_countdown(rng: random.Random) -> tuple[str, dict[str, Any], str]:
    while True:
        numbers = [rng.randint(1, 10) for _ in range(rng.choice((3, 4)))]
        expression, value, additive = str(numbers[0]), numbers[0], False
        for x in numbers[1:]:
            op = rng.choice("+-*")
            if op == "*":
                expression = f"({expression}) * {x}" if additive else f"{expression} * {x}"
                value, additive = value * x, False
            else:
                expression = f"{expression} {op} {x}"
                value, additive = value + x if op == "+" else value - x, True
        if 1 <= value <= 100:
            break
    listed = ", ".join(map(str, numbers))
    question = (
        f"Make {value} from the numbers {listed} using + - * and parentheses, "
        "each number at most once."
    )
    key = f"countdown:{sorted(numbers)}:{value}"
    return key, {"question": question, "numbers": numbers, "target": value}, expression


class Countdown(Arithmetic):
    """Reach ``data["target"]`` from ``data["numbers"]``; ``answer`` is one reference solution."""

    name = "countdown"
    sample = staticmethod(_sample_countdown)
    offered_tools = ()  # the answer is an expression, which the calculator would only evaluate

    def is_correct(self, task: Task, text: str | None) -> bool:
        answer = extract_answer(text)
        if answer is None:
            return False
        try:
            value, used = evaluate(answer, allow_unary_minus=False)
        except ExpressionError:
            return False
        # Each given number at most once: the multiset of used numbers fits in the given one.
        return value == task.data["target"] and not Counter(used) - Counter(task.data["numbers"])


TASKS: dict[str, SyntheticTask] = {
    "arithmetic": Arithmetic(),
    "calculator": Calculator(),
    "countdown": Countdown(),
    "multiturn": MultiTurn(),
}
