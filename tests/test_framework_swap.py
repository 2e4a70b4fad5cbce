"""Framework swap: the same math agent written four ways (LangGraph, LangChain, OpenAI Agents
SDK, LiteLLM), each with its one tracerl line, yields Episodes of the same structure, so one
trainer consumes them all without a change."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys

import pytest
from example_agents import EXAMPLES, FRAMEWORKS

import tracerl
from tracerl.core.otel import setup_tracing
from tracerl.testing import ScriptedServer, calculator_script


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The four example modules (each instruments its framework on import) and a server."""
    db = str(tmp_path_factory.mktemp("swap") / "swap.db")
    sys.path.insert(0, str(EXAMPLES))
    tracing = setup_tracing(db)
    modules = {}
    try:
        for framework, name in FRAMEWORKS.items():
            tracerl.uninstrument(framework)  # start clean; the import instruments
            modules[framework] = importlib.import_module(name)
        with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
            yield modules, server, db
    finally:
        for framework in FRAMEWORKS:
            tracerl.uninstrument(framework)
        sys.path.remove(str(EXAMPLES))


def _run(module, task, settings):
    result = module.solve(task, settings)
    return asyncio.run(result) if inspect.isawaitable(result) else result


def _shape(ep: tracerl.Episode) -> tuple:
    return (
        ep.termination_reason, ep.reward,
        tuple((t.name, len(t.steps), len(t.sequences), t.prefix_breaks, t.reward) for t in ep.trajectories),
        tuple(s.metadata.get("tool_names", ()) == ["calculator"] for s in ep.steps),
        tuple(tuple(s.response_ids) for s in ep.steps),
    )


def test_four_frameworks_give_the_same_episode_structure(world):
    modules, server, db = world
    tasks = [tracerl.Task(id=f"swap-{a}-{b}", data={"question": f"What is {a} + {b}?", "expression": f"{a} + {b}"},
                          answer=a + b) for a, b in [(2, 3), (17, 25), (40, 2), (9, 9)]]
    settings = tracerl.RolloutSettings(gateway_url=server.url, model="scripted", store=db, temperature=0.0)
    shapes = {}
    for framework, module in modules.items():
        episodes = [_run(module, t, settings) for t in tasks]
        for ep in episodes:
            assert ep.termination_reason is tracerl.TerminationReason.SUCCESS, (framework, ep.error)
            assert len(ep.trajectories) == 1, (framework, [(t.name, [s.metadata for s in t.steps])
                                                           for t in ep.trajectories])
            (traj,) = ep.trajectories
            assert traj.name == "solver", framework
            assert [s.sequence for s in traj.steps] == [0, 1], framework
            assert all(s.has_tokens and "framework_span_id" in s.metadata for s in traj.steps), framework
            assert ep.reward == 1.0 and ep.is_correct, framework
            (seq,) = traj.sequences
            assert sum(seq.mask) == sum(len(s.response_ids) for s in traj.steps)
        shapes[framework] = [_shape(ep) for ep in episodes]
    reference = shapes["langgraph"]
    for framework, shape in shapes.items():
        assert shape == reference, framework
