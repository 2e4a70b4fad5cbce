"""Acceptance of the framework adapters (issue 4), against the real gateway and the tiny model.

For each framework, its version of the math agent (``examples/math_agent_*.py``) with its one
``tracerl.instrument(...)`` line runs 16 tasks concurrently through ``tracerl.GatewayServer``
serving ``TorchEngine``. Each run must give 16 Episodes whose steps carry exactly the token ids
the gateway recorded, joined to the framework's span, named after the agent ("solver"), with
the agent's reward; and the agent's spans must go to the configured exporters (the SQLite
store and an OTLP receiver on 127.0.0.1) and nowhere else: not to the app's global
TracerProvider, not to OpenAI's trace ingest, not to any host but 127.0.0.1.

Also: an agent with no adapter, only the session base_url, yields correct episodes from the
gateway's spans alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import ipaddress
import socket
import sys
from typing import Any

import pytest
from example_agents import EXAMPLES, FRAMEWORKS
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_receiver import OTLPReceiver

import tracerl
from tracerl.core import semconv as sc
from tracerl.core.otel import setup_tracing
from tracerl.tasks.synthetic import TASKS

pytestmark = pytest.mark.slow

N_TASKS = 16
ARITHMETIC = TASKS["arithmetic"]


def _local(host: Any) -> bool:
    host = str(host)
    if host in ("localhost", "") or host.startswith("/"):  # unix sockets are local too
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(scope="module")
def network_log():
    """Every attempt to resolve or connect to a host other than loopback, recorded and refused."""
    attempts: list[str] = []
    mp = pytest.MonkeyPatch()
    real_getaddrinfo, real_connect, real_connect_ex = socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _local(host.decode() if isinstance(host, bytes) else host):
            attempts.append(f"resolve {host}")
            raise socket.gaierror(f"test: no network beyond 127.0.0.1 ({host})")
        return real_getaddrinfo(host, *args, **kwargs)

    def guard(real: Any) -> Any:
        def connect(self: socket.socket, address: Any) -> Any:
            if isinstance(address, tuple) and not _local(address[0]):
                attempts.append(f"connect {address}")
                raise OSError(f"test: no network beyond 127.0.0.1 ({address})")
            return real(self, address)

        return connect

    mp.setattr(socket, "getaddrinfo", getaddrinfo)
    mp.setattr(socket.socket, "connect", guard(real_connect))
    mp.setattr(socket.socket, "connect_ex", guard(real_connect_ex))
    yield attempts
    mp.undo()


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_engine, network_log):
    """Gateway + tiny model; tracerl's tracing on a private provider writing to a SQLite store
    and an OTLP receiver; the example modules imported (each instruments on import)."""
    db = str(tmp_path_factory.mktemp("accept") / "accept.db")
    receiver = OTLPReceiver()
    provider = TracerProvider()
    tracing = setup_tracing(db, otlp_endpoint=receiver.url, tracer_provider=provider)
    # The app's own global tracing: it must see none of our spans. (An SDK provider is what
    # the first setup_tracing() of the process would install anyway.)
    app_exporter = InMemorySpanExporter()
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(app_exporter))
    uploads: list[Any] = []
    from agents.tracing.processors import BackendSpanExporter

    mp = pytest.MonkeyPatch()
    mp.setattr(BackendSpanExporter, "export", lambda self, items: uploads.extend(items))
    sys.path.insert(0, str(EXAMPLES))
    modules = {}
    try:
        for framework, name in FRAMEWORKS.items():
            modules[framework] = importlib.import_module(name)
            tracerl.uninstrument(framework)
        store = tracing.stores[db]
        with tracerl.GatewayServer(tiny_engine, store) as gw:
            yield {"modules": modules, "gateway": gw, "tracing": tracing, "store": store, "db": db,
                   "receiver": receiver, "app_exporter": app_exporter, "uploads": uploads,
                   "network_log": network_log}
    finally:
        for framework in FRAMEWORKS:
            tracerl.uninstrument(framework)
        sys.path.remove(str(EXAMPLES))
        for name in [*FRAMEWORKS.values(), "common"]:  # a later import instruments again
            sys.modules.pop(name, None)
        mp.undo()
        app_exporter.shutdown()
        provider.shutdown()
        receiver.close()


def _run_all(solve: Any, tasks: list[tracerl.Task], settings: tracerl.RolloutSettings, tracing: Any) -> list:
    """All tasks at once (the engine batches them; sessions must stay apart)."""
    if inspect.iscoroutinefunction(getattr(solve, "fn", None)):
        async def run() -> list:
            return list(await asyncio.gather(*(solve(t, settings, tracing=tracing) for t in tasks)))

        return asyncio.run(run())
    with concurrent.futures.ThreadPoolExecutor(len(tasks)) as pool:
        return list(pool.map(lambda t: solve(t, settings, tracing=tracing), tasks))


def _gateway_spans(store: Any, session: str) -> dict[str, Any]:
    return {s.span_id: s for s in store.spans(session_id=session) if s.attributes.get(sc.SOURCE) == "gateway"}


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_sixteen_episodes_per_framework_through_the_gateway(world, framework):
    w = world
    module = w["modules"][framework]
    # The example's one line, pointed at this test's exporters (the store and the OTLP receiver).
    tracerl.instrument(framework, tracer_provider=w["tracing"].provider, store=w["db"],
                       otlp_endpoint=w["receiver"].url)
    try:
        tasks = ARITHMETIC.tasks("test", N_TASKS, seed=1)
        settings = tracerl.RolloutSettings(gateway_url=w["gateway"].url, store=w["db"], temperature=0.0,
                                           max_tokens=48)
        episodes = _run_all(module.solve, tasks, settings, w["tracing"])
    finally:
        tracerl.uninstrument(framework)
    assert [ep.task.id for ep in episodes] == [t.id for t in tasks]
    assert len({ep.id for ep in episodes}) == N_TASKS
    for ep in episodes:
        assert ep.termination_reason is tracerl.TerminationReason.SUCCESS, (framework, ep.id, ep.error)
        (traj,) = ep.trajectories
        assert traj.name == "solver", framework
        # every gateway call of the session is one step, joined to the framework's span of it,
        # and its token ids are the gateway's, exactly
        recorded = _gateway_spans(w["store"], ep.id)
        assert 1 <= len(ep.steps) == len(recorded) <= 3, framework
        assert [s.sequence for s in ep.steps] == list(range(len(ep.steps)))
        for step in ep.steps:
            span = recorded[step.metadata["gateway_span_id"]].attributes
            assert "framework_span_id" in step.metadata, framework
            assert step.response_ids == list(span[sc.RESPONSE_IDS]) and step.response_ids
            assert step.prompt_ids == list(span[sc.PROMPT_IDS])
            assert step.response_logprobs == pytest.approx(list(span[sc.RESPONSE_LOGPROBS]))
        # the agent's reward (computed by the example from its final answer) on its trajectory
        final = ep.steps[-1].output_message.content or ""
        assert ep.reward == traj.reward == ARITHMETIC.reward(ep.task, final), framework
        assert ep.is_correct is ARITHMETIC.is_correct(ep.task, final)

    # Our spans went to both configured exporters alike, and nowhere else.
    w["tracing"].flush()
    sessions = {ep.id for ep in episodes}
    stored = {s.span_id for sid in sessions for s in w["store"].spans(session_id=sid)
              if s.attributes.get(sc.SOURCE) != "gateway"}
    received = {s.span_id for s in w["receiver"].spans if s.session_id in sessions}
    assert stored and received == stored, framework
    framework_spans = [s for s in w["receiver"].spans if s.session_id in sessions and sc.is_llm_span(s.attributes)]
    assert len(framework_spans) >= sum(len(ep.steps) for ep in episodes)
    traces = {int(t, 16) for ep in episodes for t in ep.trace_ids}
    leaked = [s.name for s in w["app_exporter"].get_finished_spans()
              if s.context.trace_id in traces and s.instrumentation_scope.name != "fastapi"]
    assert not leaked, leaked
    from agents.tracing import get_trace_provider

    get_trace_provider().force_flush()
    assert w["uploads"] == [], "the Agents SDK uploaded traces"
    assert w["network_log"] == [], w["network_log"]


CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                "gen_ai.tool.definitions", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def _text(messages: list[Any]) -> list[tuple]:
    return [(m.role, m.content, [(t.name, t.arguments) for t in m.tool_calls]) for m in messages]


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_without_content_capture_the_episodes_through_the_gateway_are_the_same(world, framework):
    """``capture_content=False`` (an app whose traces go to a shared backend): the framework's
    spans carry no prompt or reply, and the episodes, joined to the gateway's spans, which hold
    the messages and token ids, are the ones content capture gives."""
    w = world
    module = w["modules"][framework]
    tasks = ARITHMETIC.tasks("test", 4, seed=3)
    settings = tracerl.RolloutSettings(gateway_url=w["gateway"].url, store=w["db"], temperature=0.0, max_tokens=48)
    runs = {}
    for content in (True, False):
        tracerl.instrument(framework, tracer_provider=w["tracing"].provider, store=w["db"], capture_content=content)
        try:
            runs[content] = _run_all(module.solve, tasks, settings, w["tracing"])
        finally:
            tracerl.uninstrument(framework)
    w["tracing"].flush()
    for with_content, without in zip(runs[True], runs[False], strict=True):
        assert without.termination_reason is tracerl.TerminationReason.SUCCESS, (framework, without.error)
        assert [t.name for t in without.trajectories] == [t.name for t in with_content.trajectories] == ["solver"]
        assert without.reward == with_content.reward and without.is_correct is with_content.is_correct
        pairs = list(zip(with_content.steps, without.steps, strict=True))
        assert all("framework_span_id" in b.metadata for _, b in pairs), framework
        assert [(a.prompt_ids, a.response_ids) for a, _ in pairs] == [(b.prompt_ids, b.response_ids) for _, b in pairs]
        # the same messages (tool-call ids are the gateway's, new on every call)
        assert [_text(a.input_messages + [a.output_message]) for a, _ in pairs] == \
            [_text(b.input_messages + [b.output_message]) for _, b in pairs]
        mine = [s for s in w["store"].spans(session_id=without.id) if s.attributes.get(sc.SOURCE) != "gateway"]
        assert mine and not [(s.name, k) for s in mine for k in CONTENT_KEYS if k in s.attributes], framework
        theirs = [s for s in w["store"].spans(session_id=with_content.id) if sc.is_llm_span(s.attributes)
                  and s.attributes.get(sc.SOURCE) != "gateway"]
        assert theirs and all("gen_ai.output.messages" in s.attributes for s in theirs), framework


def test_agent_without_adapter_only_the_session_url(world, tiny_engine):
    """Plain openai, no tracerl.instrument: the gateway's spans alone make the episodes."""
    from openai import OpenAI

    w = world

    @tracerl.rollout
    def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
        client = OpenAI(**config.openai_kwargs())
        reply = client.chat.completions.create(model=config.model, messages=ARITHMETIC.messages(task),
                                               **config.sampling)
        answer = reply.choices[0].message.content
        return {"reward": ARITHMETIC.reward(task, answer), "is_correct": ARITHMETIC.is_correct(task, answer)}

    tasks = ARITHMETIC.tasks("test", 4, seed=2)
    settings = tracerl.RolloutSettings(gateway_url=w["gateway"].url, store=w["db"], temperature=0.0, max_tokens=24)
    for ep in _run_all(solve, tasks, settings, w["tracing"]):
        assert ep.termination_reason is tracerl.TerminationReason.SUCCESS, ep.error
        (step,) = ep.steps
        (span,) = _gateway_spans(w["store"], ep.id).values()
        assert step.response_ids == list(span.attributes[sc.RESPONSE_IDS]) and step.prompt_ids
        assert "framework_span_id" not in step.metadata
        text = tiny_engine.tokenizer.decode(step.response_ids, skip_special_tokens=True)
        assert text == step.output_message.content
        assert ep.trajectories[0].name == "main"  # no adapter, no agent name: the default
        assert ep.reward == ep.trajectories[0].reward == ARITHMETIC.reward(ep.task, text)
    assert w["network_log"] == []


def test_the_in_process_gateway_sends_no_spans_to_the_app_tracing(world):
    from openai import OpenAI

    w = world
    w["app_exporter"].clear()
    OpenAI(base_url=w["gateway"].session_url("quiet"), api_key="x").chat.completions.create(
        model="tracerl-tiny", messages=[{"role": "user", "content": "What is 1 + 1?"}], max_tokens=4)
    assert [s.name for s in w["app_exporter"].get_finished_spans()] == []
