"""The README's 30-second example: one rollout function with a plain OpenAI client.

    tracerl gateway serve &          # first: the bundled tiny model on 127.0.0.1:8000
    python examples/quickstart.py
"""

from __future__ import annotations

import tracerl


@tracerl.rollout(timeout_s=60)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> float:
    client = config.openai_client()  # bound to this episode's session URL; one connection pool for all
    reply = client.chat.completions.create(
        model=config.model, messages=[{"role": "user", "content": task.data["question"]}], **config.sampling)
    answer = (reply.choices[0].message.content or "").strip()
    return float(answer == str(task.answer))  # the reward: strict, the whole reply must be the answer


if __name__ == "__main__":
    episode = solve(tracerl.Task(id="t1", data={"question": "What is 2+3?"}, answer=5),
                    tracerl.RolloutSettings(gateway_url="http://127.0.0.1:8000", store="runs/quickstart.db"))
    print(episode.termination_reason.value, episode.reward)
    for trajectory in episode.trajectories:  # one per agent name
        for seq in trajectory.sequences:  # token ids, mask (1 = model token), logprobs
            print(trajectory.name, len(seq.token_ids), "tokens,", sum(seq.mask), "from the model")
