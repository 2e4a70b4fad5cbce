"""One run of the app, one episode (issue 40), as a user's app does it: the one adapter line, no
``tracerl.session``, the gateway serving the bundled tiny model, ``tracerl.emit_reward`` and
``tracerl.set_task`` called after the run returns.

Each app runs in a process of its own (a fresh interpreter, as the user's app is) writing the
default store under its ``TRACERL_HOME``, which the gateway writes too; the test reads the
episodes back from that store with the converter that ``--from-traces`` uses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tracerl
from tracerl.core import semconv as sc
from tracerl.core.convert import episodes_from_store
from tracerl.core.store import SpanStore
from tracerl.tasks.data import rows_to_tasks

pytestmark = pytest.mark.slow

PRELUDE = """
import asyncio, os, sys
import tracerl
BASE = sys.argv[1]
"""

LANGGRAPH = """
from typing import TypedDict
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import create_react_agent

tracerl.instrument("langgraph")  # the one line

@tool
def km_to_miles(km: float) -> float:
    '''Convert kilometres to miles.'''
    return km * 0.621371

llm = ChatOpenAI(base_url=BASE, api_key="x", model="tracerl-tiny", max_tokens=12)
converter = create_react_agent(llm, [km_to_miles])

class State(TypedDict):
    question: str
    draft: str
    answer: str

graph = StateGraph(State)
graph.add_node("draft", lambda s: {"draft": llm.invoke(s["question"]).content})
graph.add_node("final", lambda s: {"answer": llm.invoke("Check: " + s["draft"]).content})
graph.add_edge(START, "draft"); graph.add_edge("draft", "final"); graph.add_edge("final", END)
two_nodes = graph.compile()

for i in range(3):  # the two-node graph, rewarded after each run
    two_nodes.invoke({"question": f"What is {i} + 1?"})
    tracerl.emit_reward(0.25 * i)
converter.invoke({"messages": [("user", "Convert 5 km to miles")]})
tracerl.set_task({"question": "Convert 5 km to miles", "answer": "3.1"})  # after the run, as the reward
tracerl.emit_reward(1.0)

async def main():
    await two_nodes.ainvoke({"question": "async run"})
    tracerl.emit_reward(0.5)
asyncio.run(main())

kept = tracerl.episode_id()  # a reward that comes later, from another thread
import threading
t = threading.Thread(target=lambda: tracerl.emit_reward(0.75, name="feedback", episode_id=kept))
t.start(); t.join()

with tracerl.session(task={"id": "explicit"}) as s:  # inside a session, the graph opens nothing
    two_nodes.invoke({"question": "in a session"})
    tracerl.emit_reward(0.125)
tracerl.setup_tracing().flush()
"""

AGENTS_SDK = """
from agents import Agent, OpenAIChatCompletionsModel, Runner
from openai import AsyncOpenAI

tracerl.instrument("openai-agents")

def agent():
    client = AsyncOpenAI(base_url=BASE, api_key="x")
    model = OpenAIChatCompletionsModel(model="tracerl-tiny", openai_client=client)
    return Agent(name="converter", instructions="Convert units.", model=model)

async def main():
    for i in range(2):
        await Runner.run(agent(), f"Convert {i} km to miles")
        tracerl.emit_reward(0.5)
asyncio.run(main())
Runner.run_sync(agent(), "Convert 9 km to miles")  # its trace runs in a task; the reward comes after
tracerl.emit_reward(0.25)
tracerl.setup_tracing().flush()
"""

LITELLM = """
import litellm

tracerl.instrument("litellm")
kw = dict(model="openai/tracerl-tiny", api_base=BASE, api_key="x", max_tokens=8)
for i in range(2):
    litellm.completion(messages=[{"role": "user", "content": f"What is {i} + 1?"}], **kw)
    tracerl.emit_reward(0.5)

async def main():
    await litellm.acompletion(messages=[{"role": "user", "content": "What is 7 + 1?"}], **kw)
    tracerl.emit_reward(0.75)
asyncio.run(main())
tracerl.setup_tracing().flush()
"""

STRAY_REWARD = """
tracerl.setup_tracing()
tracerl.emit_reward(1.0)  # no run, no session: nothing to attach to
tracerl.setup_tracing().flush()
"""


def _run_app(tmp_path: Path, source: str, tiny_engine) -> tuple[list[tracerl.Episode], str]:
    home = tmp_path / "home"
    home.mkdir()
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(PRELUDE) + textwrap.dedent(source))
    store = SpanStore(str(home / "traces.db"))
    env = {**os.environ, "TRACERL_HOME": str(home), "OPENAI_AGENTS_DISABLE_TRACING": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with tracerl.GatewayServer(tiny_engine, store) as gw:
        try:
            proc = subprocess.run([sys.executable, str(app), gw.url + "/v1"], env=env, capture_output=True,
                                  text=True, timeout=240)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"the app hung; it last wrote:\n{exc.stderr}") from None
    assert proc.returncode == 0, proc.stderr[-4000:]
    return episodes_from_store(SpanStore(str(home / "traces.db"))), proc.stderr


def _shape(ep: tracerl.Episode) -> tuple[list[str], dict[str, float], bool]:
    return ([t.name for t in ep.trajectories], ep.rewards, all(s.has_tokens for s in ep.steps))


def test_a_langgraph_app_gives_one_episode_per_run_with_the_reward_emitted_after_it(tmp_path, tiny_engine):
    episodes, _ = _run_app(tmp_path, LANGGRAPH, tiny_engine)
    assert len(episodes) == 6, [_shape(ep) for ep in episodes]
    two_node = [ep for ep in episodes if ep.task is None and [t.name for t in ep.trajectories] == ["draft", "final"]]
    # 3 sync runs, 1 async: each one episode of its two nodes' calls, with the gateway's token ids
    assert sorted(ep.rewards.get("reward", -1.0) for ep in two_node) == [0.0, 0.25, 0.5, 0.5]
    assert all(_shape(ep)[2] and len(ep.steps) == 2 for ep in two_node)
    (late,) = [ep for ep in two_node if "feedback" in ep.rewards]
    assert late.rewards == {"reward": 0.5, "feedback": 0.75}  # the async run's, rewarded again later
    (react,) = [ep for ep in episodes if ep.task is not None and ep.task.id != "explicit"]
    assert react.rewards == {"reward": 1.0} and react.steps and all(s.has_tokens for s in react.steps)
    row = rows_to_tasks([{"question": "Convert 5 km to miles", "answer": "3.1"}], "rows")[0]
    assert (react.task.id, react.task.answer) == (row.id, "3.1")  # the id its data row gets
    (explicit,) = [ep for ep in episodes if ep.task is not None and ep.task.id == "explicit"]
    assert explicit.rewards == {"reward": 0.125} and [t.name for t in explicit.trajectories] == ["draft", "final"]


def test_an_agents_sdk_app_gives_one_episode_per_runner_run(tmp_path, tiny_engine):
    episodes, _ = _run_app(tmp_path, AGENTS_SDK, tiny_engine)
    assert sorted(ep.rewards.get("reward", -1.0) for ep in episodes) == [0.25, 0.5, 0.5]
    assert all([t.name for t in ep.trajectories] == ["converter"] and ep.steps and _shape(ep)[2]
               for ep in episodes)


def test_a_litellm_app_gives_one_episode_per_call_outside_any_run(tmp_path, tiny_engine):
    episodes, _ = _run_app(tmp_path, LITELLM, tiny_engine)
    assert sorted(ep.rewards.get("reward", -1.0) for ep in episodes) == [0.5, 0.5, 0.75]
    assert all(len(ep.steps) == 1 and ep.steps[0].has_tokens for ep in episodes)


def test_a_reward_with_no_run_to_attach_to_is_not_an_episode_and_says_why(tmp_path, tiny_engine):
    episodes, stderr = _run_app(tmp_path, STRAY_REWARD, tiny_engine)
    assert episodes == []
    assert "no episode is open here and no app run ended here" in stderr


def test_the_episode_root_names_the_framework_run(tmp_path, tiny_engine):
    _run_app(tmp_path, LITELLM, tiny_engine)
    roots = [s for s in SpanStore(str(tmp_path / "home" / "traces.db")).spans()
             if s.attributes.get(sc.SPAN_TYPE) == "episode"]
    assert len(roots) == 3
    assert {(s.attributes[sc.EPISODE_SOURCE], s.attributes[sc.EPISODE_NAME]) for s in roots} == {
        ("litellm", "chat tracerl-tiny")}


def test_an_app_writing_another_store_than_the_gateways_is_retokenized_and_says_so(tmp_path, tiny_engine):
    """The app's store has its spans but not the gateway's token spans (another TRACERL_HOME):
    training from it re-tokenizes every step and says so, or drops them all with the setting off."""
    from tracerl.cli.init import task_rows
    from tracerl.cli.main import main

    assert main(["init", str(tmp_path / "app"), "--framework", "langgraph"]) == 0
    project = tmp_path / "app"
    rows = task_rows()[:8]
    (project / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    app_home, gateway_home = tmp_path / "app-home", tmp_path / "gateway-home"
    app_home.mkdir()
    gateway_home.mkdir()
    with tracerl.GatewayServer(tiny_engine, SpanStore(str(gateway_home / "traces.db"))) as gw:
        proc = subprocess.run([sys.executable, "production.py"], cwd=project, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "TRACERL_HOME": str(app_home),
                                                "OPENAI_BASE_URL": gw.url + "/v1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    episodes = episodes_from_store(SpanStore(str(app_home / "traces.db")))
    assert len(episodes) == 8 and not any(s.has_tokens for ep in episodes for s in ep.steps)
    outputs = []
    for extra in ([], ["--set", "algo.retokenize=false"]):
        out = subprocess.run([sys.executable, "-m", "tracerl", "train", "--from-traces", str(app_home / "traces.db"),
                              "--data", "tasks.jsonl", "--steps", "1", "--output", f"runs/r{len(outputs)}",
                              "--set", "algo.min_reward=0", *extra], cwd=project, capture_output=True, text=True,
                             timeout=300, env={**os.environ, "COLUMNS": "300"})
        outputs.append((out.returncode, out.stdout + out.stderr))
    (rc, on), (rc_off, off) = outputs
    assert rc == 0, on[-3000:]
    assert "8 episodes read, 8 kept" in on and "re-tokenized 8 of the 8 kept episodes" in on, on[-3000:]
    assert "8 recorded without token ids" in on
    assert rc_off == 1 and "8 episodes read, 0 kept" in off and "8 without the policy's token ids" in off, off[-3000:]
    assert "re-tokenized" not in off and "nothing left to train on" in off.splitlines()[-1]
