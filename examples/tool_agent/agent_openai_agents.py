"""agent.py's app written for the OpenAI Agents SDK: the same prompt, the same calculator.

    tracerl eval --model runs/tool-student-rl/checkpoints/step-000040 --data examples/tool_agent/test.jsonl \\
        --agent examples/tool_agent/agent_openai_agents.py:solve --reward examples/tool_agent/reward.py:grade

A model trained through LangGraph is evaluated through this one unchanged: the skill is the
model's, not the framework's (docs/real-model.md measures both).
"""

from __future__ import annotations

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded
from shared import MODEL_CALLS, SYSTEM, calculator

import tracerl

tracerl.instrument("openai-agents")  # the one adapter line (nothing is sent to OpenAI)

TOOLS = [function_tool(calculator)]


@tracerl.rollout(timeout_s=600)
async def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    agent = Agent(
        name="solver", instructions=SYSTEM, tools=TOOLS,
        model=OpenAIChatCompletionsModel(model=config.model, openai_client=config.async_openai_client()),
        model_settings=ModelSettings(temperature=config.sampling["temperature"],
                                     max_tokens=config.sampling.get("max_tokens")),
    )
    try:
        return str((await Runner.run(agent, task.data["question"], max_turns=MODEL_CALLS)).final_output or "")
    except MaxTurnsExceeded:
        return ""
