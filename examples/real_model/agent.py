"""The recipe's app: one chat call to the policy with the OpenAI client, the reply returned.

    tracerl train --model smollm2-135m --data examples/real_model/train.jsonl \\
        --eval-data examples/real_model/test.jsonl --agent examples/real_model/agent.py:solve \\
        --reward math --config examples/real_model/lora.yaml

The app holds no reward code: ``--reward math`` reads the reply's final answer ("The answer is
12.", else its last number) and compares it with the row's ``answer``.
"""

from __future__ import annotations

import tracerl

SYSTEM = "End your reply with: The answer is <answer>."


@tracerl.rollout(timeout_s=300)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    client = config.openai_client()  # this episode's session URL, on the process's one connection pool
    reply = client.chat.completions.create(
        model=config.model,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.data["question"]}],
        **config.sampling,
    )
    return reply.choices[0].message.content or ""
