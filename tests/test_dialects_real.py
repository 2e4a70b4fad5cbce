"""The converter reads spans recorded by the real third-party instrumentors.

Each test instruments a real framework (no mocks of the instrumentors), runs a real agent
against :class:`~tracerl.testing.ScriptedServer` (which records the gateway span with the
token ids into the same provider) and checks the Episode: steps, order, messages, tool
calls, agent names, token truth, the join of framework span and gateway span, rewards.
The last tests are hand-made spans for the dialect forms no installed instrumentor writes.

Observed with the installed versions (where they differ from span-dialects.md):

* OpenInference LangChain never attaches its spans to the OTel context, so spans below it
  (an httpx client span, OpenLLMetry's ``openai.chat``) are not its children: LangChain
  calls join their gateway span by ``gen_ai.response.id`` (from ``output.value``).
* OpenInference OpenAI-Agents ``generation`` spans carry no response id, finish reason or
  tool definitions: without W3C propagation they join by order.
* OpenInference LiteLLM drops ``tool_call_id`` from ``llm.input_messages``; ``acompletion``
  writes the reply text, not the response JSON, to ``output.value`` (no response id).
* OpenLLMetry 0.62 writes only the JSON ``gen_ai.input/output.messages`` (no flattened
  ``gen_ai.prompt.N``), finish reason ``tool_call``, flat ``gen_ai.tool.definitions``, and
  injects ``traceparent`` itself; its ``uninstrument()`` unwraps nothing (see below).
* LiteLLM's own otel callback writes tool calls only as ``gen_ai.completion.{i}.function_call``
  (empty output ``parts``), messages as ``parts`` plus OpenAI ``tool_calls``/``tool_call_id``,
  tools as ``llm.request.functions.{i}.*``, and logs spans from a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tracerl.core import semconv as sc
from tracerl.core.convert import episode_from_spans, split_sessions
from tracerl.core.spans import SpanRecord, to_records
from tracerl.core.types import Episode, Trajectory
from tracerl.testing import ScriptedServer, calculator_script

QUESTION = "What is 6*7?"
ANSWER = "The answer is 42."


# --- helpers ------------------------------------------------------------------------------


@contextmanager
def instrumented(instrumentor: Any, provider: Any, **kwargs: Any) -> Iterator[Any]:
    """Instrument for the block only: patches never leak into other tests."""
    instrumentor.instrument(tracer_provider=provider, **kwargs)
    try:
        yield instrumentor
    finally:
        instrumentor.uninstrument()


def records(exporter: Any) -> list[SpanRecord]:
    return to_records(exporter.get_finished_spans())


def gateway_spans(spans: list[SpanRecord]) -> dict[str, SpanRecord]:
    return {s.span_id: s for s in spans if s.attributes.get(sc.SOURCE) == "gateway"}


def framework_llm_spans(spans: list[SpanRecord]) -> list[SpanRecord]:
    return [s for s in spans if sc.is_llm_span(s.attributes) and s.attributes.get(sc.SOURCE) != "gateway"]


def gateway_response_id(spans: list[SpanRecord], step: Any) -> str:
    return gateway_spans(spans)[step.metadata["gateway_span_id"]].attributes["gen_ai.response.id"]


def check_token_truth(ep: Episode, spans: list[SpanRecord], server: ScriptedServer) -> None:
    """Every step is joined, and its ids are the gateway's (and what the server tokenized)."""
    gateways = gateway_spans(spans)
    by_id = {s.span_id: s for s in spans}
    bodies = [r["body"] for r in server.requests]
    for step in ep.steps:
        assert "gateway_span_id" in step.metadata and "framework_span_id" in step.metadata, step.metadata
        gw = gateways[step.metadata["gateway_span_id"]]
        assert step.prompt_ids == gw.attributes[sc.PROMPT_IDS]
        assert step.response_ids == gw.attributes[sc.RESPONSE_IDS]
        assert step.prompt_ids == server.tokenizer.render(bodies[step.sequence]["messages"])
        assert step.response_logprobs is not None and len(step.response_logprobs) == len(step.response_ids)
        framework = by_id[step.metadata["framework_span_id"]]
        assert sc.is_llm_span(framework.attributes) and framework.attributes.get(sc.SOURCE) != "gateway"


def check_one_sequence(traj: Trajectory) -> None:
    """One merged TokenSequence whose mask is 1 exactly on the model's tokens."""
    assert len(traj.sequences) == 1, [len(s) for s in traj.sequences]
    seq = traj.sequences[0]
    assert seq.step_indices == list(range(len(traj.steps)))
    model_positions: set[int] = set()
    for (start, end), step in zip(seq.response_spans, traj.steps):
        assert seq.token_ids[start:end] == step.response_ids
        model_positions.update(range(start, end))
    assert {i for i, m in enumerate(seq.mask) if m == 1} == model_positions
    assert len(seq.mask) == len(seq.token_ids)
    assert traj.prefix_breaks == 0


def check_tool_round_trip(ep: Episode, *, gateway: bool = True, tool_call_ids: bool = True) -> None:
    """Two steps: a calculator call, then the answer with the tool result in its input.

    ``gateway=False``: the episode was built from framework spans alone (no sequence
    numbers, and only what that framework records).
    """
    first, second = ep.steps
    assert first.start_time_ns <= second.start_time_ns
    assert first.input_messages[-1].content == QUESTION
    assert first.output_message is not None and first.output_message.content is None
    (call,) = first.output_message.tool_calls
    assert call.name == "calculator" and json.loads(call.arguments) == {"expression": "6*7"}
    assert first.metadata["tool_names"] == ["calculator"]
    tool_msg = second.input_messages[-1]
    assert tool_msg.role == "tool" and tool_msg.content == "42"
    if tool_call_ids:
        assert tool_msg.tool_call_id == call.id
    assert second.input_messages[-2].tool_calls[0].name == "calculator"
    assert second.output_message is not None and second.output_message.content == ANSWER
    if gateway:
        assert [first.sequence, second.sequence] == [0, 1]
        assert [first.finish_reason, second.finish_reason] == ["tool_calls", "stop"]
        assert all(s.model == "scripted" for s in ep.steps)


def framework_only_episode(spans: list[SpanRecord]) -> Episode:
    """What the converter makes of the framework's spans alone (no gateway, no tokens)."""
    return episode_from_spans([s for s in spans if s.attributes.get(sc.SOURCE) != "gateway"])


def calculator_tool_schema() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }


# --- 1. OpenInference LangChain + LangGraph -----------------------------------------------


def _solver_judge_script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if "judge" in str(messages[0].get("content")):
        return "CORRECT"
    return calculator_script(messages, tools)


def _solver_judge_graph(base_url: str, after_solver: Any = None) -> Any:
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph

    llm = ChatOpenAI(base_url=base_url, api_key="x", model="scripted")

    def solver(state: MessagesState) -> dict[str, Any]:
        reply = llm.invoke([{"role": "system", "content": "You solve."}, *state["messages"]])
        if after_solver is not None:
            after_solver()
        return {"messages": [reply]}

    def judge(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke([{"role": "system", "content": "You are the judge."}, *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("solver", solver)
    graph.add_node("judge", judge)
    graph.add_edge(START, "solver")
    graph.add_edge("solver", "judge")
    graph.add_edge("judge", END)
    return graph.compile()


def test_langgraph_nodes_become_trajectories(memory_provider):
    pytest.importorskip("langgraph")
    pytest.importorskip("langchain_openai")
    oi_langchain = pytest.importorskip("openinference.instrumentation.langchain")
    provider, exporter = memory_provider
    with instrumented(oi_langchain.LangChainInstrumentor(), provider), \
            ScriptedServer(_solver_judge_script, tracer_provider=provider) as server:
        out = _solver_judge_graph(server.session_url("ep-1")).invoke({"messages": [("user", QUESTION)]})
    assert out["messages"][-1].content == "CORRECT"

    spans = records(exporter)
    ep = episode_from_spans(spans)
    assert ep.id == "ep-1"
    assert [t.name for t in ep.trajectories] == ["solver", "judge"]
    solver, judge = (t.steps[0] for t in ep.trajectories)
    assert [solver.sequence, judge.sequence] == [0, 1]
    assert [len(t.steps) for t in ep.trajectories] == [1, 1]
    assert solver.metadata["agent"] == "solver" and solver.metadata["node"] == "solver"
    assert judge.metadata["agent"] == "judge" and judge.metadata["node_step"] == 2
    assert [m.role for m in solver.input_messages] == ["system", "user"]
    assert solver.output_message.content == ANSWER
    assert judge.input_messages[0].content == "You are the judge."
    assert judge.input_messages[-1].content == ANSWER
    assert judge.output_message.content == "CORRECT"
    assert solver.metadata["framework_dialect"] == "openinference"
    check_token_truth(ep, spans, server)
    # OI LangChain spans are not in the OTel context, so no parent link: the response id
    # that LangChain's LLMResult carries in output.value does the join.
    assert ep.metrics["convert/joined_by_response_id"] == 2
    assert ep.termination_reason.value == "success"

    alone = framework_only_episode(spans)
    assert [t.name for t in alone.trajectories] == ["solver", "judge"]
    assert alone.steps[0].output_message.content == ANSWER
    assert alone.termination_reason.value == "missing_token_ids"


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_langgraph_react_tool_round_trip(memory_provider):
    pytest.importorskip("langgraph.prebuilt")
    pytest.importorskip("langchain_openai")
    oi_langchain = pytest.importorskip("openinference.instrumentation.langchain")
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        a, b = expression.split("*")
        return str(int(a) * int(b))

    provider, exporter = memory_provider
    with instrumented(oi_langchain.LangChainInstrumentor(), provider), \
            ScriptedServer(calculator_script, tracer_provider=provider) as server:
        llm = ChatOpenAI(base_url=server.session_url("ep-1"), api_key="x", model="scripted")
        out = create_react_agent(llm, [calculator]).invoke({"messages": [("user", QUESTION)]})
    assert out["messages"][-1].content == ANSWER

    spans = records(exporter)
    ep = episode_from_spans(spans)
    assert len(ep.steps) == 2
    check_tool_round_trip(ep)
    # The prebuilt agent's node is called "agent", which OI makes an AGENT span.
    (traj,) = ep.trajectories
    assert traj.name == "agent"
    check_token_truth(ep, spans, server)
    check_one_sequence(traj)
    assert ep.steps[0].tools == [calculator_tool_schema()]
    assert ep.steps[0].input_tokens == len(ep.steps[0].prompt_ids)

    # The framework spans alone say the same (OpenInference flattened messages).
    first, second = (sc.read_llm_call(s) for s in framework_llm_spans(spans))
    assert first.dialect == second.dialect == "openinference"
    assert first.response_id == gateway_response_id(spans, ep.steps[0])
    assert first.output_message.tool_calls[0].id == second.input_messages[-1].tool_call_id
    assert first.tools[0]["function"]["name"] == "calculator"
    assert first.finish_reason == "tool_calls" and second.output_message.content == ANSWER


# --- 2. OpenInference OpenAI Agents SDK ---------------------------------------------------


@pytest.fixture
def agents_tracing_on(monkeypatch):
    """Tracing on for the Agents SDK, but nothing may reach api.openai.com.

    conftest sets OPENAI_AGENTS_DISABLE_TRACING=1; the SDK reads it once per process and
    caches it, so the cached flags are reset too (and restored afterwards). Any upload by the
    SDK's own exporter is recorded instead of sent.
    """
    pytest.importorskip("agents")
    from agents.tracing import get_trace_provider
    from agents.tracing.processors import BackendSpanExporter

    monkeypatch.delenv("OPENAI_AGENTS_DISABLE_TRACING", raising=False)
    trace_provider = get_trace_provider()
    monkeypatch.setattr(trace_provider, "_env_disabled", None, raising=False)
    monkeypatch.setattr(trace_provider, "_manual_disabled", None, raising=False)
    uploads: list[Any] = []
    monkeypatch.setattr(BackendSpanExporter, "export", lambda self, items: uploads.append(items))
    return uploads


def _agents_processors() -> list[Any]:
    from agents.tracing import get_trace_provider

    return list(get_trace_provider()._multi_processor._processors)


def _calculator_function_tool() -> Any:
    from agents import function_tool

    @function_tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        a, b = expression.split("*")
        return str(int(a) * int(b))

    return calculator


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
async def test_openai_agents_agent_name_from_agent_span(memory_provider, agents_tracing_on, api):
    oi_agents = pytest.importorskip("openinference.instrumentation.openai_agents")
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner
    from agents.tracing import get_trace_provider
    from agents.tracing.processors import BatchTraceProcessor
    from openai import AsyncOpenAI

    provider, exporter = memory_provider
    with instrumented(oi_agents.OpenAIAgentsInstrumentor(), provider), \
            ScriptedServer(calculator_script, tracer_provider=provider) as server:
        # exclusive_processor=True (the default) replaced the uploader: only OI's remains.
        assert not any(isinstance(p, BatchTraceProcessor) for p in _agents_processors())
        client = AsyncOpenAI(base_url=server.session_url("ep-1"), api_key="x")
        agent = Agent(
            name="math_solver",
            instructions="Solve it.",
            tools=[_calculator_function_tool()],
            model=(OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel)(
                model="scripted", openai_client=client),
        )
        result = await Runner.run(agent, QUESTION)
        get_trace_provider().force_flush()
    assert result.final_output == ANSWER
    assert agents_tracing_on == []  # nothing uploaded

    spans = records(exporter)
    assert any(s.name == "math_solver" and s.attributes.get("openinference.span.kind") == "AGENT" for s in spans)
    ep = episode_from_spans(spans)
    (traj,) = ep.trajectories
    assert traj.name == "math_solver"
    assert all(s.metadata["agent"] == "math_solver" for s in ep.steps)
    check_tool_round_trip(ep)
    assert ep.steps[0].input_messages[0].content == "Solve it."
    check_token_truth(ep, spans, server)
    check_one_sequence(traj)
    # generation spans carry no response id: without traceparent the join is by order; a
    # Responses API call's span names its response, and the gateway's the same id
    join = "convert/joined_by_order" if api == "chat_completions" else "convert/joined_by_response_id"
    assert ep.metrics[join] == 2, ep.metrics

    alone = framework_only_episode(spans)
    assert [t.name for t in alone.trajectories] == ["math_solver"]
    check_tool_round_trip(alone, gateway=False)


async def test_openai_agents_handoff_gives_two_trajectories(memory_provider, agents_tracing_on):
    oi_agents = pytest.importorskip("openinference.instrumentation.openai_agents")
    from agents import Agent, OpenAIChatCompletionsModel, Runner
    from openai import AsyncOpenAI

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        names = [t["function"]["name"] for t in tools]
        if "transfer_to_math_solver" in names:
            return {"content": None, "tool_calls": [{"name": "transfer_to_math_solver", "arguments": {}}]}
        if messages[-1].get("role") == "tool" and "calculator" not in json.dumps(messages[-2]):
            return calculator_script([m for m in messages if m.get("role") == "user"], tools)
        return calculator_script(messages, tools)

    provider, exporter = memory_provider
    with instrumented(oi_agents.OpenAIAgentsInstrumentor(), provider), \
            ScriptedServer(script, tracer_provider=provider) as server:
        client = AsyncOpenAI(base_url=server.session_url("ep-1"), api_key="x")
        model = OpenAIChatCompletionsModel(model="scripted", openai_client=client)
        solver = Agent(name="math_solver", instructions="Solve it.", tools=[_calculator_function_tool()], model=model)
        triage = Agent(name="triage", instructions="Route.", handoffs=[solver], model=model)
        result = await Runner.run(triage, QUESTION)
    assert result.final_output == ANSWER
    assert agents_tracing_on == []

    spans = records(exporter)
    ep = episode_from_spans(spans)
    assert [t.name for t in ep.trajectories] == ["triage", "math_solver"]
    triage_traj, solver_traj = ep.trajectories
    assert [s.sequence for s in triage_traj.steps] == [0]
    assert [s.sequence for s in solver_traj.steps] == [1, 2]
    assert triage_traj.steps[0].output_message.tool_calls[0].name == "transfer_to_math_solver"
    assert solver_traj.steps[-1].output_message.content == ANSWER
    check_token_truth(ep, spans, server)


# --- 3. OpenInference LiteLLM -------------------------------------------------------------


def test_litellm_completion_and_acompletion(memory_provider):
    litellm = pytest.importorskip("litellm")
    oi_litellm = pytest.importorskip("openinference.instrumentation.litellm")
    provider, exporter = memory_provider
    tools = [calculator_tool_schema()]
    with instrumented(oi_litellm.LiteLLMInstrumentor(), provider), \
            ScriptedServer(calculator_script, tracer_provider=provider) as server:
        kwargs = {"model": "openai/scripted", "api_base": server.session_url("ep-1"), "api_key": "x", "tools": tools}
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        first = litellm.completion(messages=messages, **kwargs).choices[0].message
        messages.append(first.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "42"})
        second = asyncio.run(litellm.acompletion(messages=messages, **kwargs))
    assert second.choices[0].message.content == ANSWER

    spans = records(exporter)
    assert sorted(s.name for s in framework_llm_spans(spans)) == ["acompletion", "completion"]
    ep = episode_from_spans(spans)
    check_tool_round_trip(ep)
    (traj,) = ep.trajectories
    check_token_truth(ep, spans, server)
    check_one_sequence(traj)
    # completion: output.value is the response JSON (id); acompletion: only the text.
    assert ep.metrics["convert/joined_by_response_id"] == 1
    assert ep.metrics["convert/joined_by_order"] == 1

    completion, acompletion = sorted(
        (sc.read_llm_call(s) for s in framework_llm_spans(spans)), key=lambda c: c.span.name, reverse=True
    )
    assert completion.model == "openai/scripted"
    assert completion.response_id == gateway_response_id(spans, ep.steps[0])
    assert acompletion.response_id is None
    assert completion.tools == tools
    # OI LiteLLM drops tool_call_id from llm.input_messages; it is read back from input.value.
    assert "llm.input_messages.2.message.tool_call_id" not in acompletion.span.attributes
    assert acompletion.input_messages[-1].tool_call_id == completion.output_message.tool_calls[0].id
    check_tool_round_trip(framework_only_episode(spans), gateway=False)


# --- 4. OpenLLMetry OpenAI instrumentor ---------------------------------------------------


def _openllmetry_wrappers() -> list[tuple[type, str, Any]]:
    """OpenLLMetry's wrapt wrappers still sitting on openai's classes."""
    found = []
    for name, module in list(sys.modules.items()):
        if not (name == "openai" or name.startswith("openai.")):
            continue
        for cls in list(vars(module).values()):
            if not isinstance(cls, type) or cls.__module__ != name:
                continue
            for attr, value in list(vars(cls).items()):
                wrapper = getattr(value, "_self_wrapper", None) if "Wrapper" in type(value).__name__ else None
                if getattr(wrapper, "__module__", "").startswith("opentelemetry.instrumentation.openai"):
                    found.append((cls, attr, value))
    return found


@contextmanager
def openllmetry_instrumented(provider: Any) -> Iterator[Any]:
    """OpenLLMetry's OpenAIInstrumentor, and really gone afterwards.

    Its ``uninstrument()`` unwraps nothing here: it calls ``unwrap("openai.resources.chat
    .completions", "Completions.create")`` while opentelemetry-instrumentation's ``unwrap``
    reads a string as ``"module.Class"`` plus a method name, finds no such attribute and
    returns. The patches (and their traceparent injection) would leak into every later
    test, so the originals are put back by hand.
    """
    openllmetry = pytest.importorskip("opentelemetry.instrumentation.openai")
    try:
        with instrumented(openllmetry.OpenAIInstrumentor(), provider) as inst:
            yield inst
    finally:
        for cls, attr, value in _openllmetry_wrappers():
            setattr(cls, attr, value.__wrapped__)
        assert _openllmetry_wrappers() == []


def test_openllmetry_openai_genai_json_joined_by_parent(memory_provider):
    pytest.importorskip("opentelemetry.instrumentation.openai")
    from openai import OpenAI

    provider, exporter = memory_provider
    tools = [calculator_tool_schema()]
    with openllmetry_instrumented(provider), \
            ScriptedServer(calculator_script, tracer_provider=provider) as server:
        client = OpenAI(base_url=server.session_url("ep-1"), api_key="x")
        messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
        first = client.chat.completions.create(model="scripted", messages=messages, tools=tools).choices[0].message
        messages.append(first.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "42"})
        stream = client.chat.completions.create(model="scripted", messages=messages, tools=tools, stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == ANSWER
    assert all("traceparent" in r["headers"] for r in server.requests)

    spans = records(exporter)
    fw = framework_llm_spans(spans)
    assert [s.name for s in fw] == ["openai.chat", "openai.chat"] and {s.kind for s in fw} == {"CLIENT"}
    attrs = fw[0].attributes
    assert not any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in attrs)
    assert json.loads(attrs["gen_ai.output.messages"])[0]["parts"][0]["type"] == "tool_call"
    assert list(attrs["gen_ai.response.finish_reasons"]) == ["tool_call"]  # GenAI's word

    ep = episode_from_spans(spans)
    check_tool_round_trip(ep)
    assert ep.steps[0].input_messages[0].content == "Be brief."
    (traj,) = ep.trajectories
    check_token_truth(ep, spans, server)
    check_one_sequence(traj)
    assert ep.metrics["convert/joined_by_parent"] == 2
    for step in ep.steps:
        gw = gateway_spans(spans)[step.metadata["gateway_span_id"]]
        assert gw.parent_span_id == step.metadata["framework_span_id"]

    first_call, second_call = (sc.read_llm_call(s) for s in fw)
    assert first_call.dialect == "genai"
    assert first_call.tools == tools  # GenAI's flat definitions, in OpenAI chat shape
    assert first_call.finish_reason == "tool_calls"
    assert second_call.input_messages[-1].tool_call_id == first_call.output_message.tool_calls[0].id
    assert second_call.output_message.content == ANSWER
    check_tool_round_trip(framework_only_episode(spans), gateway=False)


# --- 5. LiteLLM's own "otel" callback -----------------------------------------------------


@pytest.fixture
def litellm_callbacks(monkeypatch):
    """litellm copies litellm.callbacks into five more lists: swap them all, restore after."""
    litellm = pytest.importorskip("litellm")
    for name in ("callbacks", "input_callback", "success_callback", "failure_callback",
                 "_async_success_callback", "_async_failure_callback"):
        monkeypatch.setattr(litellm, name, list(getattr(litellm, name)))
    return litellm


async def test_litellm_otel_callback(memory_provider, litellm_callbacks):
    litellm = litellm_callbacks
    from litellm.integrations.opentelemetry import OpenTelemetry, OpenTelemetryConfig
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider, exporter = memory_provider
    # tracer_provider= is honoured as given (no processor added, no global set); the
    # config's exporter is never used then, so nothing leaves the process.
    callback = OpenTelemetry(config=OpenTelemetryConfig(exporter=InMemorySpanExporter()), tracer_provider=provider)
    litellm.callbacks = [callback]
    tools = [calculator_tool_schema()]

    def logged() -> int:
        return sum(1 for s in exporter.get_finished_spans() if s.name == "litellm_request")

    with ScriptedServer(calculator_script, tracer_provider=provider) as server:
        kwargs = {"model": "openai/scripted", "api_base": server.session_url("ep-1"), "api_key": "x", "tools": tools}
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        first = (await litellm.acompletion(messages=messages, **kwargs)).choices[0].message
        messages.append(first.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "42"})
        second = await litellm.acompletion(messages=messages, **kwargs)
        for _ in range(500):  # the callback logs after the call returns
            if logged() >= 2:
                break
            await asyncio.sleep(0.01)
    assert second.choices[0].message.content == ANSWER
    assert logged() == 2

    spans = records(exporter)
    fw = framework_llm_spans(spans)
    assert [s.name for s in fw] == ["litellm_request", "litellm_request"]
    attrs = fw[0].attributes
    assert json.loads(attrs["gen_ai.output.messages"])[0]["parts"] == []
    assert attrs["gen_ai.completion.0.function_call.name"] == "calculator"
    assert attrs["llm.request.functions.0.name"] == "calculator"

    ep = episode_from_spans(spans)
    check_tool_round_trip(ep)
    (traj,) = ep.trajectories
    check_token_truth(ep, spans, server)
    check_one_sequence(traj)
    assert ep.metrics["convert/joined_by_response_id"] == 2

    first_call, second_call = (sc.read_llm_call(s) for s in fw)
    assert first_call.output_message.tool_calls[0].name == "calculator"  # from function_call
    assert first_call.tools[0]["function"]["name"] == "calculator"
    assert first_call.tools[0]["function"]["parameters"]["required"] == ["expression"]
    assistant, tool_msg = second_call.input_messages[-2:]
    assert assistant.content is None and assistant.tool_calls[0].id == first.tool_calls[0].id
    assert tool_msg.tool_call_id == first.tool_calls[0].id and tool_msg.content == "42"
    check_tool_round_trip(framework_only_episode(spans), gateway=False, tool_call_ids=False)


# --- 6. W3C propagation: httpx client spans make the gateway span a child -----------------


async def _run_agent(base_url: str) -> str:
    from agents import Agent, OpenAIChatCompletionsModel, Runner
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="x")
    agent = Agent(
        name="math_solver",
        tools=[_calculator_function_tool()],
        model=OpenAIChatCompletionsModel(model="scripted", openai_client=client),
    )
    return (await Runner.run(agent, QUESTION)).final_output


@pytest.mark.parametrize("propagate", [True, False], ids=["httpx2-traceparent", "no-propagation"])
async def test_w3c_propagation_join(memory_provider, agents_tracing_on, propagate):
    oi_agents = pytest.importorskip("openinference.instrumentation.openai_agents")
    httpx_inst = pytest.importorskip("opentelemetry.instrumentation.httpx")
    provider, exporter = memory_provider
    with instrumented(oi_agents.OpenAIAgentsInstrumentor(), provider), \
            ScriptedServer(calculator_script, tracer_provider=provider) as server:
        if propagate:  # openai 3.x is built on httpx2: HTTPXClientInstrumentor sees nothing
            with instrumented(httpx_inst.HTTPX2ClientInstrumentor(), provider):
                answer = await _run_agent(server.session_url("ep-1"))
        else:
            answer = await _run_agent(server.session_url("ep-1"))
    assert answer == ANSWER
    assert all(("traceparent" in r["headers"]) is propagate for r in server.requests)

    spans = records(exporter)
    ep = episode_from_spans(spans)
    check_tool_round_trip(ep)
    check_token_truth(ep, spans, server)
    by_id = {s.span_id: s for s in spans}
    if propagate:
        assert ep.metrics["convert/joined_by_parent"] == 2
        for step in ep.steps:
            post = by_id[gateway_spans(spans)[step.metadata["gateway_span_id"]].parent_span_id]
            assert post.kind == "CLIENT" and post.parent_span_id == step.metadata["framework_span_id"]
    else:
        assert ep.metrics.get("convert/joined_by_parent", 0) == 0
        assert ep.metrics["convert/joined_by_order"] == 2
        assert all(g.parent_span_id is None for g in gateway_spans(spans).values())


def test_w3c_propagation_langchain_not_in_context(memory_provider):
    """OI LangChain does not attach its span to the context, so the POST has no parent."""
    pytest.importorskip("langchain_openai")
    oi_langchain = pytest.importorskip("openinference.instrumentation.langchain")
    httpx_inst = pytest.importorskip("opentelemetry.instrumentation.httpx")
    from langchain_openai import ChatOpenAI

    provider, exporter = memory_provider
    with instrumented(oi_langchain.LangChainInstrumentor(), provider), \
            instrumented(httpx_inst.HTTPX2ClientInstrumentor(), provider), \
            ScriptedServer(calculator_script, tracer_provider=provider) as server:
        llm = ChatOpenAI(base_url=server.session_url("ep-1"), api_key="x", model="scripted")
        assert llm.invoke(QUESTION).content == ANSWER
    spans = records(exporter)
    (post,) = [s for s in spans if s.kind == "CLIENT"]
    assert post.parent_span_id is None
    ep = episode_from_spans(spans)
    check_token_truth(ep, spans, server)
    assert ep.metrics["convert/joined_by_response_id"] == 1


def test_langchain_and_openllmetry_together_give_one_step_per_call(memory_provider):
    pytest.importorskip("langchain_openai")
    oi_langchain = pytest.importorskip("openinference.instrumentation.langchain")
    from langchain_openai import ChatOpenAI

    provider, exporter = memory_provider
    with instrumented(oi_langchain.LangChainInstrumentor(), provider), \
            openllmetry_instrumented(provider), \
            ScriptedServer(calculator_script, tracer_provider=provider) as server:
        llm = ChatOpenAI(base_url=server.session_url("ep-1"), api_key="x", model="scripted")
        assert llm.invoke(QUESTION).content == ANSWER
    spans = records(exporter)
    assert sorted(s.name for s in framework_llm_spans(spans)) == ["ChatOpenAI", "openai.chat"]
    ep = episode_from_spans(spans)
    assert len(ep.steps) == 1, ep.metrics


# --- rewards: a session on the test's provider --------------------------------------------


def test_rewards_per_step_per_agent_and_final(memory_provider, tmp_path):
    pytest.importorskip("langgraph")
    oi_langchain = pytest.importorskip("openinference.instrumentation.langchain")
    import tracerl
    from tracerl.core.otel import setup_tracing
    from tracerl.core.rollout import RolloutSettings
    from tracerl.core.store import SpanStore

    provider, exporter = memory_provider
    # emit_reward writes through the session's provider (ours), not the global one.
    tracing = setup_tracing(SpanStore(str(tmp_path / "spans.db")), tracer_provider=provider)
    with instrumented(oi_langchain.LangChainInstrumentor(), provider), \
            ScriptedServer(_solver_judge_script, tracer_provider=provider) as server:
        settings = RolloutSettings(gateway_url=server.url)
        with tracerl.session("ep-r", settings=settings, tracing=tracing) as sess:
            graph = _solver_judge_graph(sess.base_url, after_solver=lambda: tracerl.emit_reward(0.25, step=True))
            graph.invoke({"messages": [("user", QUESTION)]})
            tracerl.emit_reward(0.0, agent="judge")
            tracerl.emit_reward(1.0, is_correct=True)
    ep = sess.episode()
    assert ep.id == "ep-r"
    assert [t.name for t in ep.trajectories] == ["solver", "judge"]
    solver, judge = ep.trajectories
    assert solver.steps[0].reward == 0.25 and judge.steps[0].reward is None
    assert ep.reward == 1.0 and ep.is_correct is True
    assert solver.reward == 1.0 and judge.reward == 0.0
    spans = records(exporter)
    check_token_truth(ep, spans, server)

    # The same spans read from memory, grouped the way the store groups them.
    sessions = split_sessions(spans)
    assert "ep-r" in sessions
    assert [t.name for t in episode_from_spans(sessions["ep-r"]).trajectories] == ["solver", "judge"]


# --- hand-made spans: forms no installed instrumentor writes --------------------------------


def _span(attrs: dict[str, Any], span_id: str = "00000000000000a1", parent: str | None = None) -> SpanRecord:
    return SpanRecord(
        trace_id="0" * 31 + "1", span_id=span_id, parent_span_id=parent, name="chat",
        start_ns=1_000, end_ns=2_000, attributes=attrs,
    )


def test_legacy_flattened_prompt_and_completion():
    call = sc.read_llm_call(_span({
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": '[{"type": "text", "text": "What is "}, {"type": "text", "text": "6*7?"}]',
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.tool_calls.0.id": "call_1",
        "gen_ai.prompt.2.tool_calls.0.name": "calculator",
        "gen_ai.prompt.2.tool_calls.0.arguments": '{"expression": "6*7"}',
        "gen_ai.prompt.3.role": "tool",
        "gen_ai.prompt.3.content": "42",
        "gen_ai.prompt.3.tool_call_id": "call_1",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "",
        "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.completion.0.tool_calls.0.id": "call_2",
        "gen_ai.completion.0.tool_calls.0.name": "calculator",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"expression": "42*1"}',
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 7,
        "llm.request.functions.0.name": "calculator",
        "llm.request.functions.0.parameters": '{"type": "object"}',
    }))
    assert sc.is_llm_span(call.span.attributes) and call.dialect == "genai_flat"
    assert [m.role for m in call.input_messages] == ["system", "user", "assistant", "tool"]
    assert call.input_messages[1].content == "What is 6*7?"
    assert call.input_messages[2].tool_calls[0].name == "calculator"
    assert call.input_messages[3].tool_call_id == "call_1"
    out = call.output_message
    assert out.content is None and out.tool_calls[0].id == "call_2"
    assert call.finish_reason == "tool_calls" and call.model == "gpt-x"
    assert (call.input_tokens, call.output_tokens) == (30, 7)
    assert call.tools == [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]


def test_legacy_flattened_function_call_and_plain_text():
    call = sc.read_llm_call(_span({
        "llm.request.type": "completion",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "hi",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.function_call.name": "lookup",
        "gen_ai.completion.0.function_call.arguments": "{}",
    }))
    assert call.output_message.tool_calls[0].name == "lookup"
    plain = sc.read_llm_call(_span({
        "llm.request.type": "chat",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Hello.",
        "gen_ai.completion.0.finish_reason": "stop",
    }))
    assert plain.dialect == "genai_flat" and plain.output_message.content == "Hello."
    assert plain.input_messages == []


def test_genai_json_parts_reasoning_tool_calls_and_system_instructions():
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.response.model": "gpt-x-2026",
        "gen_ai.response.id": "resp-1",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps([
            {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
            {"role": "assistant", "parts": [
                {"type": "reasoning", "content": "Multiply."},
                {"type": "tool_call", "id": "c1", "name": "calculator", "arguments": {"expression": "6*7"}},
            ]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": 42}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c2", "result": "ok"}]},
        ]),
        "gen_ai.output.messages": json.dumps([
            {"role": "assistant", "finish_reason": "tool_call", "parts": [
                {"type": "reasoning", "content": "Check it."},
                {"type": "tool_call", "id": "c3", "name": "calculator", "arguments": {"expression": "42*1"}},
            ]},
            {"role": "assistant", "parts": [{"type": "text", "content": "second choice"}]},
        ]),
        "gen_ai.tool.definitions": json.dumps([
            {"type": "function", "name": "calculator", "description": "calc", "parameters": {"type": "object"}},
        ]),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 5,
    }
    call = sc.read_llm_call(_span(attrs))
    assert call.dialect == "genai"
    system, user, assistant, tool1, tool2 = call.input_messages
    assert (system.role, system.content) == ("system", "Be brief.")
    assert user.content == QUESTION
    assert assistant.reasoning == "Multiply." and assistant.content is None
    assert json.loads(assistant.tool_calls[0].arguments) == {"expression": "6*7"}
    assert (tool1.tool_call_id, tool1.content) == ("c1", "42")
    assert (tool2.tool_call_id, tool2.content) == ("c2", "ok")
    out = call.output_message
    assert out.reasoning == "Check it." and out.tool_calls[0].id == "c3"
    assert call.finish_reason == "tool_calls"
    assert call.model == "gpt-x-2026" and call.response_id == "resp-1"
    assert (call.input_tokens, call.output_tokens) == (12, 5)
    assert call.tools == [{"type": "function", "function": {
        "name": "calculator", "description": "calc", "parameters": {"type": "object"}}}]

    # system_instructions as plain text, and messages in OpenAI shape mixed with parts.
    attrs2 = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system_instructions": "You are terse.",
        "gen_ai.input.messages": json.dumps([
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": ""}],
             "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "parts": [{"type": "text", "content": "done"}], "tool_call_id": "c9"},
        ]),
    }
    call2 = sc.read_llm_call(_span(attrs2))
    system, user, assistant, tool = call2.input_messages
    assert system.content == "You are terse." and user.content == "hi"
    assert assistant.content is None and assistant.tool_calls[0].id == "c9"
    assert tool.tool_call_id == "c9" and tool.content == "done"
    assert call2.output_message is None


def test_openinference_contents_and_reasoning():
    call = sc.read_llm_call(_span({
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "Hi ",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.2.message_content.type": "text",
        "llm.input_messages.0.message.contents.2.message_content.text": "there",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.contents.0.message_content.type": "reasoning",
        "llm.output_messages.0.message.contents.0.message_content.text": "think",
        "llm.output_messages.0.message.contents.1.message_content.type": "text",
        "llm.output_messages.0.message.contents.1.message_content.text": "Hello.",
        "llm.output_messages.0.message.contents.2.message_content": "not a dict",
        "output.value": json.dumps({"id": "chatcmpl-9", "choices": []}),
    }))
    assert call.input_messages[0].content == "Hi there"
    assert call.output_message.content == "Hello." and call.output_message.reasoning == "think"
    assert call.response_id == "chatcmpl-9"


@pytest.mark.parametrize("attrs", [
    {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "{not json", "gen_ai.output.messages": "[1, null]"},
    {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([{"role": "user", "name": 5, "parts": "x"}])},
    {"gen_ai.operation.name": "chat", "gen_ai.system_instructions": "[1, 2]", "gen_ai.tool.definitions": "[1, {}]"},
    {"openinference.span.kind": "LLM", "llm.input_messages.0.message.tool_calls.0.tool_call": "x",
     "llm.tools.0.tool.json_schema": "{bad", "metadata": "[]", "output.value": "{bad"},
    {"llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "[{broken",
     "gen_ai.completion.0.tool_calls.0": "flat", "gen_ai.response.finish_reasons": "stop"},
])
def test_malformed_values_never_raise(attrs):
    call = sc.read_llm_call(_span(attrs))
    assert isinstance(call, sc.LLMCall)
    episode_from_spans([_span(attrs)])  # nor does the converter


def test_framework_and_gateway_spans_join_by_parent_in_flat_dialect():
    """A legacy-flat framework span with a gateway child: one step, both ids."""
    gw = {
        sc.SPAN_TYPE: "llm", sc.SOURCE: "gateway", sc.SESSION_ID: "ep-9", sc.SEQUENCE: 0,
        sc.PROMPT_IDS: [1, 2, 3], sc.RESPONSE_IDS: [4, 5], "gen_ai.operation.name": "chat",
    }
    fw = {
        "llm.request.type": "chat", "gen_ai.request.model": "m",
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "yo",
    }
    ep = episode_from_spans([_span(fw, "00000000000000f1"), _span(gw, "00000000000000a2", parent="00000000000000f1")])
    (step,) = ep.steps
    assert step.metadata["gateway_span_id"] == "00000000000000a2"
    assert step.metadata["framework_span_id"] == "00000000000000f1"
    assert step.metadata["framework_dialect"] == "genai_flat"
    assert step.input_messages[0].content == "hi" and step.output_message.content == "yo"
    assert step.prompt_ids == [1, 2, 3] and ep.metrics["convert/joined_by_parent"] == 1

