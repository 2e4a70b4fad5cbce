"""Iterative refinement: the agent answers, hears "Wrong, try again." and answers again, up to
the task's turn limit, as one LiteLLM conversation. One trajectory ("solver") whose turns merge
into one token sequence (the feedback tokens masked out); the reward is discounted by the
turns used.

    python examples/refine_multiturn.py --tasks 8
"""

from __future__ import annotations

import litellm
from common import MULTITURN, run

import tracerl

tracerl.instrument("litellm")  # the one tracerl line


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    messages = MULTITURN.messages(task)
    answer, turn = "", 0
    for turn in range(1, MULTITURN.max_turns + 1):
        reply = litellm.completion(
            model=f"openai/{config.model}", api_base=config.base_url, api_key=config.api_key, messages=messages,
            metadata={"tracerl_agent": "solver"}, **config.sampling,
        ).choices[0].message
        answer = reply.content or ""
        messages.append({"role": "assistant", "content": answer})
        feedback = MULTITURN.feedback(task, answer, turn)  # None: right, or out of turns
        if feedback is None:
            break
        messages.append({"role": "user", "content": feedback})
    return MULTITURN.rewards(task, answer, turns=turn)


if __name__ == "__main__":
    run(solve, __doc__.splitlines()[0], dataset=MULTITURN)
