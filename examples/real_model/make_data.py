"""Write the recipe's data: one-step word problems with small numbers, as JSONL.

    python examples/real_model/make_data.py     # rewrites train.jsonl and test.jsonl here

Each row is ``{"id", "question", "answer"}``. Train and test are disjoint by question text:
a question is held out when a hash of it says so, so no test question is ever trained on.
Deterministic: the same files every time.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ["Ana", "Ben", "Carla", "Dev", "Emma", "Farid", "Gia", "Hugo", "Ines", "Jon"]
THINGS = ["apples", "marbles", "books", "coins", "stamps", "pencils", "shells", "cards"]
# (template, sign): the answer is a + b or a - b
TEMPLATES = [
    ("{n} has {a} {t} and finds {b} more. How many {t} does {n} have now?", 1),
    ("{n} buys {a} {t} on Monday and {b} {t} on Tuesday. How many {t} did {n} buy in all?", 1),
    ("A box holds {a} {t}. {n} puts {b} more {t} in it. How many {t} are in the box?", 1),
    ("{n} has {a} {t} and gives {b} of them away. How many {t} does {n} have left?", -1),
    ("There are {a} {t} on a table. {n} takes {b} of them. How many {t} are left on the table?", -1),
    ("{n} had {a} {t} and lost {b}. How many {t} does {n} have now?", -1),
]
NUMBERS = range(1, 13)
ROWS = 2400  # drawn from the ~50,000 combinations, by a fixed seed
HELD_OUT = 0.125


def rows() -> list[dict]:
    out = []
    for (template, sign), name, thing, a, b in itertools.product(TEMPLATES, NAMES, THINGS, NUMBERS, NUMBERS):
        if sign < 0 and b >= a:  # no negative or zero counts left
            continue
        question = template.format(n=name, t=thing, a=a, b=b)
        out.append({"id": hashlib.sha256(question.encode()).hexdigest()[:12], "question": question,
                    "answer": a + sign * b})
    return random.Random(0).sample(out, ROWS)


def held_out(row: dict) -> bool:
    return int(row["id"], 16) / 16**12 < HELD_OUT


def main() -> None:
    every = rows()
    test = [r for r in every if held_out(r)]
    train = [r for r in every if not held_out(r)]
    for name, part in (("train.jsonl", train), ("test.jsonl", test)):
        (HERE / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    print(f"train.jsonl: {len(train)} rows, test.jsonl: {len(test)} rows")


if __name__ == "__main__":
    main()
