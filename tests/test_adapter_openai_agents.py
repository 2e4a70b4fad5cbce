"""tracerl.instrument("openai-agents"): Agents SDK runs become episodes; nothing is uploaded."""

from __future__ import annotations

import json

import pytest

import tracerl
from tracerl.testing import ScriptedServer, calculator_script

agents = pytest.importorskip("agents")


@pytest.fixture
def instrumented(tracing, monkeypatch):
    from agents.tracing import processors

    sent = []
    # Were anything to reach OpenAI's uploader, record it instead of sending it.
    monkeypatch.setattr(processors.BackendSpanExporter, "export", lambda self, items: sent.extend(items))
    tracerl.instrument("openai-agents", tracer_provider=tracing.provider)
    yield sent
    tracerl.uninstrument("openai-agents")


async def _run(agent, question, streamed):
    """Runner.run, or Runner.run_streamed with every event consumed."""
    from agents import Runner

    if not streamed:
        return await Runner.run(agent, question)
    result = Runner.run_streamed(agent, question)
    async for _ in result.stream_events():
        pass
    return result


async def _solve_7_plus_5(tracing, model_class="OpenAIChatCompletionsModel", streamed=False):
    import agents as sdk
    from agents import Agent, function_tool
    from openai import AsyncOpenAI

    @function_tool
    def calculator(expression: str) -> str:
        """Evaluate a+b."""
        a, b = expression.split("+")
        return str(int(a) + int(b))

    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
        @tracerl.rollout
        async def solve(task, config):
            client = AsyncOpenAI(base_url=server.url + "/v1", api_key="x")
            agent = Agent(name="math_solver", instructions="Use the calculator.", tools=[calculator],
                          model=getattr(sdk, model_class)(model="scripted", openai_client=client))
            return float("12" in (await _run(agent, task.data["q"], streamed)).final_output)

        ep = await solve({"id": "t", "data": {"q": "What is 7+5?"}}, tracing=tracing)
    spans = next(iter(tracing.stores.values())).spans(session_id=ep.id)
    return ep, {s.span_id: s for s in spans if s.scope and s.scope.endswith("openai_agents")}


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_responses_api_model_gives_the_chat_completions_episode(tracing, instrumented, streamed):
    """The SDK's default model speaks the Responses API: its response spans carry the same
    conversation as GenAI messages, so the episode is the one the chat model gives, and our
    spans alone (an app on a hosted model) still hold every message."""
    from tracerl.core.convert import episode_from_spans

    chat_ep, _ = await _solve_7_plus_5(tracing)
    ep, spans = await _solve_7_plus_5(tracing, "OpenAIResponsesModel", streamed)
    assert ep.reward == 1.0 and [t.name for t in ep.trajectories] == ["math_solver"]
    assert sorted(s.name for s in spans.values()) == [
        "chat scripted", "chat scripted", "execute_tool calculator", "invoke_agent math_solver"]
    assert ep.metrics["convert/joined_by_parent"] == 2 and all(s.has_tokens for s in ep.steps)
    first, second = ep.steps
    assert [(m.role, m.content) for m in first.input_messages] == [
        ("system", "Use the calculator."), ("user", "What is 7+5?")]
    assert first.output_message.tool_calls[0].name == "calculator"
    assert second.input_messages[-1].role == "tool" and second.input_messages[-1].content == "12"
    assert second.output_message.content == "The answer is 12."
    for ours, chat in zip(ep.steps, chat_ep.steps, strict=True):  # the same conversation, both APIs
        assert [(m.role, m.content) for m in ours.input_messages] == [
            (m.role, m.content) for m in chat.input_messages]
        assert ours.output_message.content == chat.output_message.content

    alone = episode_from_spans(list(spans.values()))
    assert [s.has_tokens for s in alone.steps] == [False, False]
    assert [[t["function"]["name"] for t in s.tools] for s in alone.steps] == [["calculator"], ["calculator"]]
    assert [m.model_dump() for s in alone.steps for m in s.input_messages] == [
        m.model_dump() for s in ep.steps for m in s.input_messages]


async def test_agent_with_tool_becomes_an_episode_joined_to_gateway_tokens(tracing, instrumented):
    ep, spans = await _solve_7_plus_5(tracing)
    assert ep.reward == 1.0 and ep.termination_reason is tracerl.TerminationReason.SUCCESS
    (traj,) = ep.trajectories
    assert traj.name == "math_solver"
    assert [s.sequence for s in traj.steps] == [0, 1] and all(s.has_tokens for s in traj.steps)
    assert ep.metrics["convert/joined_by_parent"] == 2
    assert len(traj.sequences) == 1 and traj.prefix_breaks == 0
    names = sorted(s.name for s in spans.values())
    assert names == ["chat scripted", "chat scripted", "execute_tool calculator", "invoke_agent math_solver"]
    assert instrumented == []  # nothing went to OpenAI's trace endpoint


async def test_a_streamed_run_gives_the_same_episode(tracing, instrumented):
    ep, spans = await _solve_7_plus_5(tracing, streamed=True)
    assert ep.reward == 1.0 and [t.name for t in ep.trajectories] == ["math_solver"]
    assert [s.sequence for s in ep.steps] == [0, 1] and all(s.has_tokens for s in ep.steps)
    assert ep.metrics["convert/joined_by_parent"] == 2
    assert ep.steps[1].output_message.content == "The answer is 12."
    assert sorted(s.name for s in spans.values()) == [
        "chat scripted", "chat scripted", "execute_tool calculator", "invoke_agent math_solver"]


async def test_workflow_spans_option_adds_the_run_above_the_agent(tracing):
    tracerl.instrument("openai-agents", tracer_provider=tracing.provider, workflow_spans=True)
    try:
        ep, spans = await _solve_7_plus_5(tracing)
    finally:
        tracerl.uninstrument("openai-agents")
    (agent,) = [s for s in spans.values() if s.name == "invoke_agent math_solver"]
    assert spans[agent.parent_span_id].name.startswith("invoke_workflow")
    assert ep.reward == 1.0 and [t.name for t in ep.trajectories] == ["math_solver"]


async def test_a_handoff_is_a_span_and_each_agent_a_trajectory(tracing, instrumented):
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    @function_tool
    def calculator(expression: str) -> str:
        """Evaluate a+b."""
        a, b = expression.split("+")
        return str(int(a) + int(b))

    def script(messages, tools):
        if "transfer_to_math_solver" in [t["function"]["name"] for t in tools]:  # the triage agent
            return {"content": None, "tool_calls": [{"name": "transfer_to_math_solver", "arguments": {}}]}
        if messages[-1].get("role") == "tool" and "calculator" not in json.dumps(messages[-2]):
            return calculator_script([m for m in messages if m.get("role") == "user"], tools)  # just handed over
        return calculator_script(messages, tools)

    with ScriptedServer(script, tracer_provider=tracing.provider) as server:
        @tracerl.rollout
        async def solve(task, config):
            model = OpenAIChatCompletionsModel(model="scripted", openai_client=AsyncOpenAI(
                base_url=server.url + "/v1", api_key="x"))
            solver = Agent(name="math_solver", instructions="Use the calculator.", tools=[calculator], model=model)
            triage = Agent(name="triage", instructions="Route.", handoffs=[solver], model=model)
            return float("12" in (await Runner.run(triage, task.data["q"])).final_output)

        ep = await solve({"id": "t", "data": {"q": "What is 7+5?"}}, tracing=tracing)
    spans = {s.span_id: s for s in next(iter(tracing.stores.values())).spans(session_id=ep.id)
             if s.scope and s.scope.endswith("openai_agents")}
    (handoff,) = [s for s in spans.values() if s.name.startswith("handoff")]
    assert handoff.name == "handoff triage -> math_solver"
    assert spans[handoff.parent_span_id].name == "invoke_agent triage"
    assert ep.reward == 1.0 and [t.name for t in ep.trajectories] == ["triage", "math_solver"]
    triage, solver = ep.trajectories
    assert [s.sequence for s in triage.steps] == [0] and [s.sequence for s in solver.steps] == [1, 2]
    assert triage.steps[0].output_message.tool_calls[0].name == "transfer_to_math_solver"
    assert all(s.has_tokens for s in ep.steps) and ep.metrics["convert/joined_by_parent"] == 3
    assert instrumented == []


def test_uninstrument_restores_the_sdk_processors(tracing):
    from agents.tracing import get_trace_provider

    provider = get_trace_provider()
    before = tuple(provider._multi_processor._processors)
    tracerl.instrument("openai-agents", tracer_provider=tracing.provider)
    tracerl.instrument("openai-agents", tracer_provider=tracing.provider)
    during = provider._multi_processor._processors
    assert sum(type(p).__name__ == "TracerlTracingProcessor" for p in during) == 1
    assert not any(type(p).__name__ == "BatchTraceProcessor" for p in during)
    tracerl.uninstrument("openai-agents")
    assert tuple(provider._multi_processor._processors) == before


def test_the_private_names_the_adapter_reads_exist_in_this_sdk():
    """The SDK can set its processors and switch tracing, but not say what they were, which
    uninstrument restores: if a new version renames what the adapter reads, this fails first."""
    from agents.tracing import get_trace_provider

    from tracerl.adapters import openai_agents as adapter

    provider = get_trace_provider()
    assert isinstance(adapter._processors(provider), tuple)
    assert hasattr(provider, "_manual_disabled") and hasattr(provider, "_refresh_disabled_flag")


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_agent_on_the_sdk_default_model_trains_through_the_gateway(tracing, instrumented, tiny_engine,
                                                                           streamed):
    """The Agents SDK's default model speaks the Responses API; the gateway serves it, so the
    one instrument line is all an agent needs: its episode carries the gateway's tokens."""
    from agents import Agent, ModelSettings, OpenAIResponsesModel
    from openai import AsyncOpenAI

    from tracerl.gateway import GatewayServer

    store = next(iter(tracing.stores.values()))
    with GatewayServer(tiny_engine, store) as gateway:
        @tracerl.rollout
        async def answer(task, config):
            agent = Agent(name="solver", instructions="Answer briefly.",
                          model=OpenAIResponsesModel(model="tracerl-tiny", openai_client=AsyncOpenAI(
                              base_url=gateway.url + "/v1", api_key="x")),
                          model_settings=ModelSettings(max_tokens=12, temperature=0.0))
            return float(bool((await _run(agent, task.data["q"], streamed)).final_output))

        ep = await answer({"id": "t", "data": {"q": "What is 2 + 3?"}}, tracing=tracing)
    (traj,) = ep.trajectories
    (step,) = traj.steps
    assert traj.name == "solver" and ep.metrics["convert/joined_by_parent"] == 1
    (gateway_span,) = [s for s in store.spans(session_id=ep.id) if s.attributes.get("tracerl.source") == "gateway"]
    assert step.response_ids == gateway_span.attributes["tracerl.llm.response_token_ids"]
    assert step.prompt_ids == gateway_span.attributes["tracerl.llm.prompt_token_ids"]
    assert [m.role for m in step.input_messages] == ["system", "user"]
    assert step.output_message.content == tiny_engine.tokenizer.decode(step.response_ids, skip_special_tokens=True)
