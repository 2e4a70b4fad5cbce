"""agent.py's app written for the OpenAI Agents SDK: the same prompt, the same calculator.

    tracerl eval --model runs/tool-agent/student-rl/checkpoints/step-000020 --data examples/tool_agent/test.jsonl \\
        --agent examples/tool_agent/agent_openai_agents.py:solve --reward examples/tool_agent/reward.py:grade

A model trained through LangGraph is evaluated through this one unchanged: the skill is the
model's, not the framework's (docs/real-model.md measures both).
"""

from __future__ import annotations

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
from agents.exceptions import AgentsException
from shared import AFTER_TOOL, MODEL_CALLS, SYSTEM, calculator

import tracerl

tracerl.instrument("openai-agents")  # the one adapter line (nothing is sent to OpenAI)

TOOLS = [function_tool(calculator)]


@tracerl.rollout(timeout_s=600)
async def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    def agent(**behaviour: str) -> Agent:
        return Agent(
            name="solver", instructions=SYSTEM, tools=TOOLS, **behaviour,  # type: ignore[arg-type]
            model=OpenAIChatCompletionsModel(model=config.model, openai_client=config.async_openai_client()),
            model_settings=ModelSettings(temperature=config.sampling["temperature"],
                                         max_tokens=config.sampling.get("max_tokens")))

    try:
        # the calculator's result first, then the same user turn agent.py's graph adds, asking for the answer
        first = await Runner.run(agent(tool_use_behavior="stop_on_first_tool"), task.data["question"],
                                 max_turns=MODEL_CALLS)
        if not any(item.type == "tool_call_output_item" for item in first.new_items):
            return str(first.final_output or "")  # it answered without the tool
        history = [*first.to_input_list(), {"role": "user", "content": AFTER_TOOL}]
        return str((await Runner.run(agent(), history, max_turns=MODEL_CALLS)).final_output or "")
    except AgentsException:  # a tool it was not offered, more turns than allowed: no answer
        return ""
