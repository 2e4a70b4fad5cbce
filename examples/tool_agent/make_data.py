"""Write the tool-agent recipe's data: word problems no small model multiplies from memory.

    python examples/tool_agent/make_data.py     # rewrites train.jsonl and test.jsonl here

Each row is ``{"id", "question", "answer"}``: a three-digit by two-digit product, plus or
minus a two-digit number in half of them (two chained operations), told as a story. Train and
test are disjoint by the arithmetic itself (``a*b+c``), not only by the wording: a problem is
held out when a hash of its arithmetic says so. 2,400 training rows and 240 held out (the recipe
measures on the first 200); deterministic.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ["Ana", "Ben", "Carla", "Dev", "Emma", "Farid", "Gia", "Hugo", "Ines", "Jon"]
# (the story of a*b, what it counts, the sentence that adds c, the one that takes c away)
STORIES = [
    ("A farm packs {a} eggs into each crate and fills {b} crates.", "eggs",
     "It also has {c} loose eggs.", "It breaks {c} of them."),
    ("A shop sells {b} boxes of pens with {a} pens in each box.", "pens",
     "It also sells {c} single pens.", "{c} of the pens come back broken."),
    ("A stadium has {b} rows of {a} seats.", "seats",
     "{c} more seats stand by the field.", "{c} of the seats are removed."),
    ("{n} reads {a} pages a week for {b} weeks.", "pages",
     "{n} then reads {c} more pages.", "{n} skips {c} of those pages."),
    ("A printer prints {a} labels a minute for {b} minutes.", "labels",
     "{c} labels were printed before that.", "{c} of the labels jam and are thrown away."),
    ("{n} stacks {b} boxes with {a} cards in each.", "cards",
     "{n} adds {c} cards on top.", "{n} gives {c} of the cards away."),
]
TRAIN, TEST = 2400, 240


def draw(rng: random.Random) -> tuple[str, dict]:
    """One problem: (its arithmetic, which decides its split; its row)."""
    a, b, c = rng.randint(100, 999), rng.randint(11, 99), rng.randint(10, 99)
    story, thing, more, fewer = rng.choice(STORIES)
    op = rng.choice(["", "", "+", "-"])  # half one product, half a product and a sum or difference
    text = story + {"": "", "+": " " + more, "-": " " + fewer}[op]
    ask = f" How many {thing} are left?" if op == "-" else f" How many {thing} are there in all?"
    question = text.format(a=a, b=b, c=c, n=rng.choice(NAMES)) + ask
    answer = a * b + (c if op == "+" else -c if op == "-" else 0)
    key = f"{a}*{b}{op}{c if op else ''}"
    return key, {"id": hashlib.sha256(question.encode()).hexdigest()[:12], "question": question, "answer": answer}


def held_out(key: str) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 16**8 < 0.1


def rows() -> tuple[list[dict], list[dict]]:
    rng = random.Random(0)
    train: dict[str, dict] = {}
    test: dict[str, dict] = {}
    while len(train) < TRAIN or len(test) < TEST:
        key, row = draw(rng)
        part = test if held_out(key) else train
        if key not in part and len(part) < (TEST if part is test else TRAIN):
            part[key] = row
    return list(train.values()), list(test.values())


def main() -> None:
    train, test = rows()
    for name, part in (("train.jsonl", train), ("test.jsonl", test)):
        (HERE / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    print(f"train.jsonl: {len(train)} rows, test.jsonl: {len(test)} rows")


if __name__ == "__main__":
    main()
