"""Sub-agents through a real LangGraph app and the real gateway: a supervisor that calls an
expert sub-agent K times is K+1 training rows with their lineage, no prefix break, and one
sample of its GRPO group.

The model is scripted (tests/checks.ScriptEngine) on Qwen2.5's chat template, which writes a
tool call in a form of its own: the supervisor's chain stays whole only if the gateway keeps
its context while the expert's calls come in between (tracerl.gateway.turns)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from checks import ScriptEngine, qwen_tokenizer

import tracerl
from tracerl.core.convert import episode_from_spans
from tracerl.core.store import SpanStore
from tracerl.gateway.server import GatewayServer
from tracerl.trainers.batching import make_batch, score
from tracerl.trainers.config import TrainConfig

pytest.importorskip("langgraph")

K = 3
EXPERT = "expert"


def _delegate(question: str) -> str:
    return "```json\n" + json.dumps({"name": "ask_expert", "arguments": {"question": question}}) + "\n```"


def _script(k: int = K) -> list[str]:
    """The replies in call order: the supervisor delegates, the expert answers, k times, then
    the supervisor concludes."""
    replies = []
    for i in range(k):
        replies += [_delegate(f"What is {i} + {i}?"), f"It is {2 * i}."]
    return replies + ["All done."]


def _app(llm: Any) -> Any:
    """A supervisor node with an ``ask_expert`` tool; the tool runs an expert graph of its own,
    a fresh context each time."""
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph

    expert = StateGraph(MessagesState)
    expert.add_node(EXPERT, lambda s: {"messages": [llm.invoke(s["messages"])]})
    expert.add_edge(START, EXPERT)
    expert_app = expert.compile()

    @tool
    def ask_expert(question: str) -> str:
        """Ask the arithmetic expert one question."""
        out = expert_app.invoke({"messages": [SystemMessage("You are an arithmetic expert."), HumanMessage(question)]})
        return str(out["messages"][-1].content)

    model = llm.bind_tools([ask_expert])

    def supervisor(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: MessagesState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls
        return {"messages": [ToolMessage(ask_expert.invoke(c["args"]), tool_call_id=c["id"]) for c in calls]}

    graph = StateGraph(MessagesState)
    graph.add_node("supervisor", supervisor)
    graph.add_node("tools", tools)
    graph.add_edge(START, "supervisor")
    graph.add_conditional_edges("supervisor", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "supervisor")
    return graph.compile()


@pytest.fixture
def langgraph_on(tracing):
    # An example app imported earlier in this process instruments at import, with its own
    # provider; instrument() is idempotent, so take that out first.
    tracerl.uninstrument("langgraph")
    tracerl.instrument("langgraph", tracer_provider=tracing.provider)
    yield
    tracerl.uninstrument("langgraph")


def _episodes(tmp_path, tracing, rewards: list[float], **server: Any) -> list[tracerl.Episode]:
    """One episode of the app per reward, each its own session, on the same task."""
    from langchain_openai import ChatOpenAI

    store = SpanStore(tmp_path / "gw.db")
    engine = ScriptEngine(qwen_tokenizer(), [r for _ in rewards for r in _script()])
    settings = tracerl.RolloutSettings(gateway_url="")
    task = tracerl.Task(id="t-0", data={"question": "Sum three things."})
    out = []
    with GatewayServer(engine, store, **server) as gw:
        for n, reward in enumerate(rewards):
            sid = f"ep-{n}"
            with tracerl.session(sid, settings=settings.model_copy(update={"gateway_url": gw.url}), tracing=tracing) as s:
                llm = ChatOpenAI(model="teacher", base_url=s.base_url, api_key="x", temperature=0)
                result = _app(llm).invoke({"messages": [{"role": "system", "content": "Delegate to the expert."},
                                                        {"role": "user", "content": task.data["question"]}]})
                assert result["messages"][-1].content == "All done."
                tracerl.emit_reward(reward)
            tracing.flush()
            spans = store.spans(session_id=sid) + tracing.default_store().spans(session_id=sid)
            out.append(episode_from_spans(spans, episode_id=sid, task=task))
    assert not engine.replies  # every scripted reply was asked for, in that order
    return out


def test_a_supervisor_calling_a_sub_agent_k_times_is_k_plus_one_rows_with_lineage(tmp_path, tracing, langgraph_on):
    (ep,) = _episodes(tmp_path, tracing, [1.0])
    by_name = {t.name: t for t in ep.trajectories}
    assert set(by_name) == {"supervisor", EXPERT}
    head, subs = by_name["supervisor"], by_name[EXPERT]
    assert len(head.steps) == K + 1 and len(head.sequences) == 1  # the supervisor's turns: one chain
    assert len(subs.steps) == K and len(subs.sequences) == K  # a fresh context per question
    assert head.prefix_breaks == subs.prefix_breaks == ep.metrics["convert/prefix_breaks"] == 0
    # each expert context names the supervisor's chain that called it
    assert [(s.start, s.parent_agent, s.parent) for s in subs.sequences] == [("fresh", "supervisor", 0)] * K
    assert head.sequences[0].start == "first" and head.sequences[0].parent is None
    rows = make_batch([ep], TrainConfig(drop_zero_variance=False)).rows
    assert len(rows) == K + 1
    assert sum(sum(r.mask) for r in rows) == sum(len(s.response_ids or []) for t in ep.trajectories for s in t.steps)


def test_without_a_context_per_caller_the_supervisor_breaks_at_every_delegation(tmp_path, tracing, langgraph_on):
    # The check above can fail: with continuation off, the template re-renders each tool call.
    (ep,) = _episodes(tmp_path, tracing, [1.0], continue_tokens=False)
    head = next(t for t in ep.trajectories if t.name == "supervisor")
    assert head.prefix_breaks == K and len(head.sequences) == K + 1


def test_k_chains_keep_the_episode_one_sample_of_its_group(tmp_path, tracing, langgraph_on):
    episodes = _episodes(tmp_path, tracing, [1.0, 0.0])
    cfg = TrainConfig()
    scored, groups = score(episodes, cfg)
    assert groups == 2  # (task, supervisor) and (task, expert): one group per agent, not per chain
    members: dict[str, list[float]] = {}
    for item in scored:
        assert len(set(item.advantages)) == 1  # one final reward: every step of a trajectory alike
        members.setdefault(item.trajectory.name, []).append(item.advantages[0])
    assert {name: len(adv) for name, adv in members.items()} == {"supervisor": 2, EXPERT: 2}  # the group size
    assert all(adv[0] > 0 > adv[1] for adv in members.values())  # the rewarded episode pushed up
    rows = make_batch(episodes, cfg).rows
    assert len(rows) == 2 * (K + 1)
    expert_rows = [r for r in rows if r.agent == EXPERT]
    assert len({max(a for a in r.advantages) for r in expert_rows[:K]}) == 1  # the episode's advantage on each chain
