"""tracerl.instrument("langgraph"): one line, and LangGraph/LangChain calls become episodes."""

from __future__ import annotations

import json
from typing import TypedDict

import pytest

import tracerl
from tracerl.testing import ScriptedServer, calculator_script

langgraph = pytest.importorskip("langgraph.graph")


@pytest.fixture(autouse=True)
def _no_earlier_instrumentation():
    """Start uninstrumented: a test file run before this one in the same process (an example
    app instruments at import) leaves the adapter on, with its own tracer provider."""
    tracerl.uninstrument("all")


class State(TypedDict, total=False):
    question: str
    answer: str
    verdict: str


@pytest.fixture
def instrumented(tracing):
    tracerl.instrument("langgraph", tracer_provider=tracing.provider)
    yield
    tracerl.uninstrument("langgraph")


def _solver_judge(base_url: str, **chat_options):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="scripted", base_url=base_url, api_key="x", **chat_options)
    graph = langgraph.StateGraph(State)
    graph.add_node("solver", lambda s: {"answer": llm.invoke(s["question"]).content})
    graph.add_node("judge", lambda s: {"verdict": llm.invoke(f"Check: {s['answer']} for 1+1").content})
    graph.add_edge(langgraph.START, "solver")
    graph.add_edge("solver", "judge")
    graph.add_edge("judge", langgraph.END)
    return graph.compile()


@pytest.mark.parametrize("use_responses_api", [False, True])
def test_langgraph_nodes_become_trajectories_joined_to_gateway_tokens(tracing, instrumented, use_responses_api):
    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
        @tracerl.rollout
        def solve(task, config):
            # a plain /v1 URL: the session reaches the server in W3C baggage
            graph = _solver_judge(server.url + "/v1", use_responses_api=use_responses_api)
            out = graph.invoke({"question": task.data["q"]})
            tracerl.emit_reward(1.0 if "5" in str(out["answer"]) else 0.0)

        ep = solve({"id": "t1", "data": {"q": "What is 2+3?"}}, tracing=tracing)
    assert ep.termination_reason is tracerl.TerminationReason.SUCCESS and ep.reward == 1.0
    assert [t.name for t in ep.trajectories] == ["solver", "judge"]
    assert ep.metrics["convert/joined_by_parent"] == 2
    for step in ep.steps:
        assert step.has_tokens and step.metadata["framework_dialect"] == "genai"
    # the URL had no session: it reached the server in W3C baggage
    assert {r["session"] for r in server.requests} == {ep.id}
    assert all("baggage" in r["headers"] for r in server.requests)
    assert ep.steps[0].output_message.content == "The answer is 5."


async def test_async_graph_and_tool_calls(tracing, instrumented):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent  # still shipped in langgraph 1.x

    @tool
    def calculator(expression: str) -> str:
        """Evaluate a+b."""
        a, b = expression.split("+")
        return str(int(a) + int(b))

    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
        @tracerl.rollout
        async def solve(task, config):
            llm = ChatOpenAI(model="scripted", base_url=server.url + "/v1", api_key="x")
            agent = create_react_agent(llm, [calculator])
            result = await agent.ainvoke({"messages": [("user", task.data["q"])]})
            return float("42" in result["messages"][-1].content)

        ep = await solve({"id": "t2", "data": {"q": "What is 40+2?"}}, tracing=tracing)
    assert ep.reward == 1.0
    (traj,) = ep.trajectories
    assert [s.sequence for s in traj.steps] == [0, 1] and traj.steps[0].metadata["tool_names"] == ["calculator"]
    assert len(traj.sequences) == 1 and traj.prefix_breaks == 0
    assert ep.metrics["convert/joined_by_parent"] == 2
    spans = next(iter(tracing.stores.values())).spans(session_id=ep.id)
    (tool_span,) = [s for s in spans if s.name == "execute_tool calculator"]
    # what the tool was called with and returned (OTel GenAI's opt-in tool attributes)
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"expression": "40+2"}
    assert tool_span.attributes["gen_ai.tool.call.result"] == "42"


def test_uninstrument_restores_langchain_exactly(tracing):
    import httpx
    import httpx2
    from langchain_core.tracers.context import _configure_hooks

    before = list(_configure_hooks)
    sends = [httpx.Client.send, httpx.AsyncClient.send, httpx2.Client.send, httpx2.AsyncClient.send]
    tracerl.instrument("langchain", tracer_provider=tracing.provider)
    tracerl.instrument("langchain", tracer_provider=tracing.provider)  # idempotent
    assert len(_configure_hooks) == len(before) + 1
    assert httpx2.Client.send is not sends[2]
    tracerl.uninstrument("langchain")
    tracerl.uninstrument("langchain")
    assert _configure_hooks == before
    assert [httpx.Client.send, httpx.AsyncClient.send, httpx2.Client.send, httpx2.AsyncClient.send] == sends


def test_unknown_framework_is_a_clear_error():
    with pytest.raises(tracerl.ConfigError, match="unknown framework 'crewai'"):
        tracerl.instrument("crewai")


def _solver_judge_episode(tracing, task_id):
    """The solver-judge graph run once as an episode, against the scripted server."""
    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
        @tracerl.rollout
        def solve(task, config):
            _solver_judge(server.url + "/v1").invoke({"question": task.data["q"]})

        return solve({"id": task_id, "data": {"q": "What is 2+3?"}}, tracing=tracing)


def _adapter_spans(tracing, session_id):
    spans = next(iter(tracing.stores.values())).spans(session_id=session_id)
    return [s for s in spans if s.scope and s.scope.endswith("langchain")]


def test_default_writes_llm_and_tool_spans_only_with_node_and_step(tracing, instrumented):
    ep = _solver_judge_episode(tracing, "t3")
    mine = _adapter_spans(tracing, ep.id)
    assert sorted(s.name for s in mine) == ["chat scripted", "chat scripted"]
    assert [(s.attributes["tracerl.node.name"], s.attributes["tracerl.node.step"]) for s in
            sorted(mine, key=lambda s: s.start_ns)] == [("solver", 1), ("judge", 2)]
    assert [s.metadata["node_step"] for s in ep.steps] == [1, 2]


def test_workflow_spans_option_adds_workflow_and_node_spans(tracing):
    tracerl.instrument("all", tracer_provider=tracing.provider, workflow_spans=True)  # LiteLLM etc. ignore it
    try:
        ep = _solver_judge_episode(tracing, "t4")
    finally:
        tracerl.uninstrument("all")
    spans = {s.span_id: s for s in _adapter_spans(tracing, ep.id)}
    names = sorted(s.name for s in spans.values())
    assert names == ["chat scripted", "chat scripted", "invoke_workflow LangGraph", "node judge", "node solver"]
    for chat in (s for s in spans.values() if s.name.startswith("chat")):
        assert spans[chat.parent_span_id].name == f"node {chat.attributes['tracerl.node.name']}"
    assert [t.name for t in ep.trajectories] == ["solver", "judge"]


def test_an_option_the_adapter_does_not_have_is_a_clear_error():
    with pytest.raises(tracerl.ConfigError, match="the LiteLLM adapter has no workflow spans"):
        tracerl.instrument("litellm", workflow_spans=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        tracerl.instrument("langchain", bogus=True)


def test_the_private_name_the_adapter_reads_exists_in_this_langchain():
    """LangChain has no public way to remove a configure hook; if a new version drops the
    list uninstrument edits, this fails first (and instrument() refuses, saying so)."""
    from tracerl.adapters.langchain import _configure_hooks

    assert isinstance(_configure_hooks(), list)


def test_a_message_edited_between_calls_is_recorded_as_edited(tracing, instrumented):
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
        @tracerl.rollout
        def solve(task, config):
            llm = ChatOpenAI(model="scripted", base_url=server.url + "/v1", api_key="x")
            question = HumanMessage("What is 2+3?")
            llm.invoke([question])
            question.content = "What is 4+4?"  # same object, new content
            llm.invoke([question])

        ep = solve({"id": "t5", "data": {}}, tracing=tracing)
    mine = sorted(_adapter_spans(tracing, ep.id), key=lambda s: s.start_ns)
    assert ["2+3" in s.attributes["gen_ai.input.messages"] for s in mine] == [True, False]
    assert "4+4" in mine[1].attributes["gen_ai.input.messages"]


def test_spans_are_live_sdk_spans_a_users_processor_sees_on_the_starting_thread(tmp_path):
    """tracerl's spans are ordinary SDK spans: a user's own processor gets ``on_start`` on the
    thread that starts the span, during the call, and the LLM span is the current span (an
    SDK span) while the framework makes its HTTP call."""
    import threading

    import httpx
    from langchain_openai import ChatOpenAI
    from opentelemetry import trace
    from opentelemetry.sdk.trace import Span, SpanProcessor, TracerProvider

    from tracerl.core.otel import setup_tracing
    from tracerl.core.store import SpanStore

    events: list[tuple[str, str, int, bool]] = []

    class Mine(SpanProcessor):
        def on_start(self, span, parent_context=None):
            if span.instrumentation_scope.name == "tracerl.langchain":  # not the scripted server's
                events.append(("start", span.name, threading.get_ident(), isinstance(span, Span)))

        def on_end(self, span):
            if span.instrumentation_scope.name == "tracerl.langchain":
                events.append(("end", span.name, threading.get_ident(), span.end_time is not None))

    provider = TracerProvider()
    provider.add_span_processor(Mine())
    tracing = setup_tracing(SpanStore(tmp_path / "live.db"), tracer_provider=provider)
    current: list[object] = []
    tracerl.instrument("langchain", tracer_provider=provider)
    try:
        with ScriptedServer(calculator_script, tracer_provider=provider) as server:
            @tracerl.rollout
            def solve(task, config):
                hook = {"request": [lambda request: current.append(trace.get_current_span())]}
                llm = ChatOpenAI(model="scripted", base_url=server.url + "/v1", api_key="x",
                                 http_client=httpx.Client(event_hooks=hook))
                llm.invoke("What is 2+3?")
                events.append(("agent", "", threading.get_ident(), True))
                # what the agent saw at the start, before the span ended and anything was exported
                return float(any(e[0] == "start" and e[1].startswith("chat") for e in events))

            ep = solve({"id": "t6", "data": {}}, tracing=tracing)
    finally:
        tracerl.uninstrument("langchain")
        provider.shutdown()
    agent_thread = next(e[2] for e in events if e[0] == "agent")
    chat_starts = [e for e in events if e[0] == "start" and e[1] == "chat scripted"]
    assert chat_starts and all(e[2] == agent_thread and e[3] for e in chat_starts)
    assert ep.reward == 1.0  # on_start had run while the agent was still inside its call
    assert len(current) == 1 and isinstance(current[0], Span) and current[0].name == "chat scripted"
    assert ("end", "chat scripted", agent_thread, True) in events
