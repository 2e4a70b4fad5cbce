"""The reward, outside the app: both apps are graded by this one function, unchanged.

tracerl calls grade(task, artifacts) once each episode has ended: task.answer is the row's
"answer" column, task.data the row, artifacts["answer"] the text the app returned.

It is strict on purpose. The bundled model often gets the sum right in another form
("Answer: 12"); crediting only "... The answer is 12." makes training teach the asked-for format
as well as the sum. The built-in regex grader does the same without a file:

    --reward regex --set 'reward_options.pattern=The answer is (-?\\d+)\\.$'
"""

from __future__ import annotations

from typing import Any

import tracerl


@tracerl.reward  # checks the signature when the file is imported, not at the first episode
def grade(task: tracerl.Task, artifacts: dict[str, Any]) -> float:
    text = str(artifacts.get("answer") or "").strip()
    return 1.0 if text.endswith(f"The answer is {task.answer}.") else 0.0
