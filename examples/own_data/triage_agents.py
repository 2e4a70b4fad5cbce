"""The same task as an OpenAI Agents SDK app: a triage agent that hands off to a solver agent.

    tracerl train --data examples/own_data/problems.jsonl --holdout 0.2 \\
        --agent examples/own_data/triage_agents.py:solve --reward examples/own_data/reward.py:grade

Each episode's trace holds two trajectories, "triage" and "solver" (the SDK's agent names), and
both are trained. The app returns the final answer's text, as the LangGraph one does.
"""

from __future__ import annotations

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded, ModelBehaviorError
from agents.result import RunResult
from arith_tools import calculator, lookup_constant

import tracerl

tracerl.instrument("openai-agents")  # the one adapter line; nothing is uploaded to OpenAI

# The solver's prompt is the one the bundled tiny model was trained on; a real model gets yours.
SOLVER = "End your reply with: The answer is <answer>."
TRIAGE = "Hand every arithmetic question to the solver."
MAX_TURNS = 3  # model calls per agent: a tool call, the answer, one spare


def agents(config: tracerl.RolloutContext) -> tuple[Agent, Agent]:
    """(triage, solver) on this episode's session: one client from the process's shared pool."""
    model = OpenAIChatCompletionsModel(model=config.model, openai_client=config.async_openai_client())
    settings = ModelSettings(temperature=config.sampling["temperature"], max_tokens=config.sampling.get("max_tokens"))
    solver = Agent(name="solver", instructions=SOLVER, tools=[function_tool(calculator), function_tool(lookup_constant)],
                   model=model, model_settings=settings)
    triage = Agent(name="triage", instructions=TRIAGE, handoffs=[solver], model=model, model_settings=settings)
    return triage, solver


async def run(agent: Agent, question: str) -> RunResult | None:
    """The run's result, or None when it ended without an answer: tool calls past MAX_TURNS, or a
    call of a tool the agent lacks (the tiny model calls "calculator" from any agent)."""
    try:
        return await Runner.run(agent, question, max_turns=MAX_TURNS)
    except (MaxTurnsExceeded, ModelBehaviorError):
        return None


@tracerl.rollout(timeout_s=120)
async def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    triage, solver = agents(config)
    question = task.data["question"]
    result = await run(triage, question)
    if result is None or result.last_agent is not solver:
        # Triage did not hand off. A real model does as told; the bundled tiny one cannot write
        # "transfer_to_solver" (it only ever learned to call "calculator"), so the handoff is made here.
        result = await run(solver, question)
    return "" if result is None else str(result.final_output)  # no answer grades 0
