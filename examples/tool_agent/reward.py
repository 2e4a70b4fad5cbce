"""The recipe's reward, outside the app: the reply must end with "The answer is <the number>."

It returns ``is_correct`` itself, so accuracy is the share of right answers (tracerl counts a
reward of 1 as correct only when a reward says nothing), and ``answer_found``, so ``tracerl
diagnose`` tells a reply with no answer from a wrong one.
"""

from __future__ import annotations

import re

_ANSWER = re.compile(r"the answer is\s*\$?(-?[\d,]*\d)(?:\.\d+)?\s*\.?\s*$", re.IGNORECASE)


def grade(task, episode):
    found = _ANSWER.search((episode["answer"] or "").strip())
    value = int(found[1].replace(",", "")) if found else None
    right = value is not None and value == int(task.answer)
    return {"reward": 1.0 if right else 0.0, "is_correct": right, "answer_found": float(found is not None)}
