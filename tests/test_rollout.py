"""The rollout API against a real local OpenAI-compatible server and the real openai client."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from openai import AsyncOpenAI, OpenAI

import tracerl
from tracerl.core.rollout import session_base_url
from tracerl.testing import ScriptedServer, calculator_script

TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "evaluate a + b",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]



@pytest.fixture
def server(tracing):
    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as srv:
        yield srv


def _settings(server, **kw):
    return tracerl.RolloutSettings(gateway_url=server.url, model="scripted", api_key="x", **kw)


def _tool_agent(client, question):
    """A hand-written tool-calling loop, as a user without any framework would write it."""
    messages = [{"role": "user", "content": question}]
    for _ in range(4):
        reply = client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            return reply.content
        for tc in reply.tool_calls:
            a, b = json.loads(tc.function.arguments)["expression"].split("+")
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": str(int(a) + int(b))})
    return ""


def test_rollout_sync_builds_episode_with_tokens_and_reward(server, tracing):
    @tracerl.rollout
    def solve(task, config):
        assert config.base_url == f"{server.url}/sessions/{config.episode_id}/v1"
        answer = _tool_agent(OpenAI(**config.openai_kwargs()), task.data["question"])
        tracerl.emit_reward(0.5, name="format")
        return {"reward": float(str(task.answer) in answer), "is_correct": str(task.answer) in answer}

    task = tracerl.Task(id="add-1", data={"question": "What is 2+3?"}, answer=5)
    ep = solve(task, _settings(server), tracing=tracing)
    assert ep.termination_reason is tracerl.TerminationReason.SUCCESS
    assert ep.task == task and ep.reward == 1.0 and ep.is_correct is True
    assert ep.rewards == {"reward": 1.0, "format": 0.5}
    steps = ep.steps
    assert [s.sequence for s in steps] == [0, 1]
    assert steps[0].output_message.tool_calls[0].name == "calculator"
    assert steps[1].input_messages[-1].role == "tool" and steps[1].input_messages[-1].content == "5"
    assert all(s.has_tokens for s in steps)
    (traj,) = ep.trajectories
    assert len(traj.sequences) == 1 and traj.prefix_breaks == 0
    # every server request of this episode went to its session URL
    assert {r["session"] for r in server.requests} == {ep.id}


async def test_rollout_async_and_concurrent_episodes_stay_apart(server, tracing):
    @tracerl.rollout
    async def solve(task, config):
        client = AsyncOpenAI(**config.openai_kwargs())
        reply = await client.chat.completions.create(
            model=config.model, messages=[{"role": "user", "content": task.data["question"]}])
        await client.close()
        return float(str(task.answer) in reply.choices[0].message.content)

    tasks = [tracerl.Task(id=f"t{i}", data={"question": f"What is {i}+{i}?"}, answer=2 * i) for i in range(6)]
    episodes = await asyncio.gather(*(solve(t, _settings(server), tracing=tracing) for t in tasks))
    assert len({e.id for e in episodes}) == 6
    for task, ep in zip(tasks, episodes):
        assert ep.task.id == task.id and ep.reward == 1.0
        (step,) = ep.steps
        assert f"{task.data['question']}" in step.input_messages[0].content
        assert step.sequence == 0  # numbered per session


def test_exceptions_and_timeouts_become_termination_reasons(server, tracing):
    @tracerl.rollout
    def crashes(task, config):
        OpenAI(**config.openai_kwargs()).chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "1+1"}])
        raise RuntimeError("tool exploded")

    ep = crashes({"id": "t"}, _settings(server), tracing=tracing)
    assert ep.termination_reason is tracerl.TerminationReason.ERROR
    assert ep.error == "RuntimeError: tool exploded"
    assert len(ep.steps) == 1  # what happened before the crash is kept
    assert "in crashes" in ep.traceback and 'raise RuntimeError("tool exploded")' in ep.traceback


def test_an_agents_traceback_is_kept_on_its_span_and_in_exported_traces(server, tracing, caplog):
    """The exception is an ``exception`` event on the episode span (as the SDK's
    record_exception writes it), so an episode read back later from the store has it too;
    the log says it once, not once per failing episode."""
    from tracerl.core.convert import episode_from_spans

    @tracerl.rollout
    def crashes(task, config):
        raise ValueError("bad tool arguments")

    episodes = [crashes({"id": f"t{i}"}, _settings(server), tracing=tracing) for i in range(5)]
    tracing.flush()
    store = next(iter(tracing.stores.values()))
    spans = store.spans(session_id=episodes[0].id)
    [root] = [s for s in spans if s.name == "tracerl.episode"]
    [event] = [e for e in root.events if e.name == "exception"]
    assert event.attributes["exception.type"] == "ValueError"
    again = episode_from_spans(spans, episode_id=episodes[0].id)
    assert again.error == "ValueError: bad tool arguments" and "in crashes" in (again.traceback or "")
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "bad tool arguments" in r.getMessage()]
    assert len(warnings) == 1 and "test_rollout.py" in warnings[0].getMessage()

    @tracerl.rollout(timeout_s=0.3)
    def hangs(task, config):
        time.sleep(2)

    ep = hangs({"id": "t2"}, _settings(server), tracing=tracing)
    assert ep.termination_reason is tracerl.TerminationReason.TIMEOUT


async def test_async_timeout_and_settings_timeout_wins(server, tracing):
    @tracerl.rollout(timeout_s=30)
    async def slow(task, config):
        await asyncio.sleep(5)

    ep = await slow({"id": "t"}, _settings(server, timeout_s=0.2), tracing=tracing)
    assert ep.termination_reason is tracerl.TerminationReason.TIMEOUT


def test_text_without_a_reward_function_is_warned_about_once(server, tracing, caplog, monkeypatch):
    from tracerl.core import rollout_fn as rollout

    monkeypatch.setattr(rollout, "_WARNED", set())

    @tracerl.rollout
    def talks(task, config):
        return _tool_agent(OpenAI(**config.openai_kwargs()), "What is 2+3?")

    episodes = [talks({"id": f"t{i}"}, _settings(server), tracing=tracing) for i in range(4)]
    assert all(ep.reward is None and ep.artifacts for ep in episodes)  # kept, ungraded
    said = [r for r in caplog.records if r.levelname == "WARNING" and "no reward function" in r.getMessage()]
    assert len(said) == 1 and "--reward" in said[0].getMessage()


def test_session_context_manager_and_step_rewards(server, tracing):
    client = None
    with tracerl.session(task={"id": "multi", "data": {}}, settings=_settings(server), tracing=tracing) as s:
        client = OpenAI(base_url=s.base_url, api_key="x")
        for q in ["1+1", "2+2"]:
            client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": q}])
            tracerl.emit_reward(0.1, step=True)
        tracerl.emit_reward(1.0, is_correct=True)
    ep = s.episode()
    assert ep.id == s.episode_id and ep.task.id == "multi"
    assert [st.reward for st in ep.steps] == [0.1, 0.1]
    assert ep.reward == 1.0 and ep.is_correct is True


def test_session_id_reaches_spans_of_other_instrumentation(tracing):
    # A span started by any library inside the session is stamped with the session id.
    tracer = tracing.provider.get_tracer("some.instrumentor")
    with tracerl.session(episode_id="ep-42", tracing=tracing), tracer.start_as_current_span("third-party work"):
        pass
    tracing.flush()
    store = next(iter(tracing.stores.values()))
    names = {r.name: r for r in store.spans(session_id="ep-42")}
    assert names["third-party work"].attributes["tracerl.session.id"] == "ep-42"
    assert "tracerl.episode" in names


def test_bad_inputs_are_clear_errors():
    with pytest.raises(tracerl.ConfigError, match="no '/'"):
        tracerl.session(episode_id="a/b")
    with pytest.raises(ValueError, match="NaN"):
        tracerl.emit_reward(float("nan"))
    assert session_base_url("http://h:1/v1", "e") == "http://h:1/sessions/e/v1"
    assert session_base_url("http://h:1/", "e") == "http://h:1/sessions/e/v1"
