"""The math agent with the OpenAI Agents SDK (its default Responses API model, a function tool).

    python examples/math_agent_openai_agents.py --tasks 8
"""

from __future__ import annotations

from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded
from common import MAX_CALLS, instructions, problem, run
from common import calculator as evaluate

import tracerl

tracerl.instrument("openai-agents")  # the one tracerl line (nothing is sent to OpenAI)


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an integer expression with + - * and parentheses."""
    try:
        return evaluate(expression)
    except ValueError as exc:
        return f"error: {exc}"


@tracerl.rollout(timeout_s=120)
async def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    system, messages = instructions(problem(task).messages(task))  # the same prompt as the other three versions
    agent = Agent(
        name="solver", instructions=system, tools=[calculator],
        # the episode's session on one connection pool; the gateway serves the Responses API too
        model=OpenAIResponsesModel(model=config.model, openai_client=config.async_openai_client()),
        model_settings=ModelSettings(temperature=config.sampling["temperature"],
                                     max_tokens=config.sampling.get("max_tokens")),
    )
    try:
        answer = (await Runner.run(agent, messages, max_turns=MAX_CALLS)).final_output
    except MaxTurnsExceeded:
        answer = None
    spec = problem(task)
    return spec.rewards(task, answer)  # reward, is_correct, answer_found


if __name__ == "__main__":
    import asyncio

    def run_sync(task: tracerl.Task, settings: tracerl.RolloutSettings) -> tracerl.Episode:
        return asyncio.run(solve(task, settings))

    run(run_sync, __doc__.splitlines()[0])
