"""The adapters' parts timed alone, without a framework or HTTP (``instrument_overhead.py
--callbacks`` and ``--export`` run these).

* :func:`callbacks_only`: CPU of each adapter's own callbacks per LLM call, fed recorded-shaped
  inputs, with the real span pipeline into a SQLite store;
* :func:`export_batches`: the store's export cost per span by spans per SQLite commit;
* :func:`store_ids`: the store's write cost per span with random against time-ordered ids;
* :func:`history_cost`: what recording a call's conversation costs by its length.

    python bench/adapter_parts.py --callbacks
    python bench/adapter_parts.py --export
    python bench/adapter_parts.py --ids
    python bench/adapter_parts.py --history
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from instrument_overhead import TOOLS  # noqa: E402 - after the environment it reads


def callbacks_only(reps: int = 7, n: int = 1000) -> None:
    """CPU of the adapters' own code per LLM call, without the framework or HTTP: the LangChain
    handler's callbacks for one LangGraph node's call (by default the chat run: 1 span; with
    ``workflow_spans=True`` also the workflow, node and an internal run: 3 spans) and the LiteLLM
    logger's (1 span), fed recorded-shaped inputs; spans go
    through a BatchSpanProcessor into a SQLite store as in real use. Min and median of ``reps``."""
    import datetime
    import uuid

    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, LLMResult
    from litellm.types.utils import ModelResponse
    from opentelemetry.sdk.trace import TracerProvider

    from tracerl.adapters import _common
    from tracerl.adapters.langchain import TracerlCallbackHandler
    from tracerl.adapters.litellm import TracerlLiteLLMLogger
    from tracerl.core.otel import setup_tracing

    tracing = setup_tracing(os.path.join(tempfile.mkdtemp(), "callbacks.db"), tracer_provider=TracerProvider())
    call = {"id": "call_1", "name": "calculator", "args": {"expression": "12 + 30"}}
    chat = [SystemMessage("You are a helpful assistant."), HumanMessage("What is 12 + 30?"),
            AIMessage("", tool_calls=[call]), ToolMessage("42", tool_call_id="call_1")]
    meta = {"finish_reason": "stop", "id": "chatcmpl-1", "model_name": "m"}
    result = LLMResult(generations=[[ChatGeneration(message=AIMessage(
        "The answer is 42.", response_metadata=meta, usage_metadata={"input_tokens": 9, "output_tokens": 6,
                                                                     "total_tokens": 15}))]],
        llm_output={"id": "chatcmpl-1", "model_name": "m"})
    run_ids = [uuid.uuid4() for _ in range(4 * n)]

    def langchain_caller(workflow_spans: bool) -> Callable[[int], None]:
        handler = TracerlCallbackHandler(_common.tracer(tracing, "langchain"), workflow_spans=workflow_spans)

        def call(i: int) -> None:
            wf, node, inner, llm = run_ids[4 * (i % n): 4 * (i % n) + 4]
            # LangChain's dispatch asks ignore_chain before every chain event, as here
            if not handler.ignore_chain:
                handler.on_chain_start({}, {}, run_id=wf, name="LangGraph")
                handler.on_chain_start({}, {}, run_id=node, parent_run_id=wf, name="agent",
                                       metadata={"langgraph_node": "agent", "langgraph_step": 1})
                handler.on_chain_start({}, {}, run_id=inner, parent_run_id=node, name=None)
            handler.on_chat_model_start({}, [chat], run_id=llm, parent_run_id=inner,
                                        metadata={"langgraph_node": "agent", "langgraph_step": 1,
                                                  "ls_provider": "openai"},
                                        invocation_params={"model": "m", "temperature": 0.0, "tools": TOOLS})
            handler.on_llm_end(result, run_id=llm)
            if not handler.ignore_chain:
                for run_id in (inner, node, wf):
                    handler.on_chain_end({}, run_id=run_id)

        return call

    logger = TracerlLiteLLMLogger(_common.tracer(tracing, "litellm"))
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is 12 + 30?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                    "name": "calculator", "arguments": json.dumps(call["args"])}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "42"}]
    response = ModelResponse(id="chatcmpl-1", model="m", usage={"prompt_tokens": 9, "completion_tokens": 6,
                                                                "total_tokens": 15},
                             choices=[{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": "The answer is 42."}}])
    call_ids = [uuid.uuid4().hex for _ in range(n)]
    now = datetime.datetime.now()

    def litellm_call(i: int) -> None:
        kwargs = {"litellm_call_id": call_ids[i % n], "model": "m", "messages": messages,
                  "optional_params": {"tools": TOOLS},
                  "litellm_params": {"custom_llm_provider": "openai", "metadata": {"tracerl_agent": "solver"}}}
        logger.log_pre_api_call("m", messages, kwargs)
        logger.log_success_event(kwargs, response, now, now)

    print(f"adapter callbacks alone: {reps} x {n} calls; CPU us per LLM call (min / median), callbacks, "
          "and callbacks + span export")
    cases = (("langchain (default)", langchain_caller(False)), ("langchain workflow_spans=True", langchain_caller(True)),
             ("litellm", litellm_call), ("openai-agents", _agents_caller(tracing, messages, n)))
    for name, fn in cases:
        for i in range(300):
            fn(i)
        tracing.flush()
        inline, total = [], []
        for _ in range(reps):
            gc.collect()
            c0 = time.process_time()
            for i in range(n):
                fn(i)
            c1 = time.process_time()
            tracing.flush()
            inline.append((c1 - c0) / n * 1e6)
            total.append((time.process_time() - c0) / n * 1e6)
        print(f"{name:20} {min(inline):6.0f} / {statistics.median(inline):6.0f}   "
              f"{min(total):6.0f} / {statistics.median(total):6.0f}")


def export_batches(n: int = 10_000, batches: tuple[int, ...] = (1, 5, 22, 100, 512)) -> None:
    """What the store's exporter costs per span by spans per SQLite commit: ``n`` GenAI chat
    spans (700 characters of messages, a new session every 3 spans) made by the SDK, then
    exported in batches of each size into a fresh store. User and system CPU apart: a commit
    writes WAL pages, system time."""
    import resource

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracerl.core.store import SpanStore, StoreExporter

    provider, memory = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for i in range(n):
        tracer.start_span("chat m", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m",
            "tracerl.session.id": f"session-{i // 3}", "gen_ai.input.messages": "x" * 600,
            "gen_ai.output.messages": "y" * 100, "gen_ai.usage.input_tokens": 9, "gen_ai.usage.output_tokens": 5}).end()
    spans = memory.get_finished_spans()
    print(f"store export: {n} spans, CPU us per span by spans per commit")
    for size in batches:
        exporter = StoreExporter(SpanStore(os.path.join(tempfile.mkdtemp(), "export.db")))
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for i in range(0, n, size):
            exporter.export(spans[i:i + size])
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        user, system = (r1.ru_utime - r0.ru_utime) / n * 1e6, (r1.ru_stime - r0.ru_stime) / n * 1e6
        print(f"  {size:4} per commit: {user + system:6.1f} (user {user:.1f}, system {system:.1f})")


def store_ids(prefill: int = 50_000, batch: int = 150, rounds: int = 8, per_round: int = 10) -> None:
    """What the ids cost the store: spans written in batches of ``batch`` (one SQLite commit
    each) into a store already holding ``prefill`` spans, with uniformly random trace and
    session ids (the SDK's default, uuid4 episode ids) against time-ordered ones
    (tracerl.core.ids). Each case has a store of its own; rounds alternate the cases, so
    machine noise hits both alike. Chat spans of 700 characters of messages, 3 per trace and
    session, as an episode of three LLM calls; and 1 per trace without a session, as a lone
    call. CPU us per span (user + system: a commit writes every index page it touched)."""
    import random
    import resource
    import uuid

    from tracerl.core.ids import new_episode_id, time_ordered_trace_id
    from tracerl.core.store import SpanStore

    makers = {"random": (lambda: f"{random.getrandbits(128):032x}", lambda: uuid.uuid4().hex),
              "time-ordered": (lambda: f"{time_ordered_trace_id():032x}", new_episode_id)}

    def records(n: int, ids: tuple[Callable[[], str], Callable[[], str]], per_trace: int,
                sessions: bool) -> list[dict[str, Any]]:
        out = []
        for i in range(n):
            if i % per_trace == 0:
                trace_id, session = ids[0](), ids[1]()
            now = time.time_ns()
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": "x" * 600,
                     "gen_ai.output.messages": "y" * 100, "gen_ai.usage.input_tokens": 9}
            if sessions:
                attrs["tracerl.session.id"] = session
            out.append({"trace_id": trace_id, "span_id": f"{random.getrandbits(64):016x}", "parent_span_id": None,
                        "name": "chat m", "kind": "CLIENT", "start_ns": now, "end_ns": now, "attributes": attrs,
                        "status_code": "UNSET", "status_message": None, "events": [], "resource": {},
                        "scope": "bench"})
        return out

    print(f"store writes: {batch} spans per commit into a store of {prefill:,}+ spans, {rounds} rounds x "
          f"{per_round} commits; CPU us per span (median of rounds)")
    for per_trace, sessions in ((3, True), (1, False)):
        stores = {}
        for name, ids in makers.items():
            stores[name] = store = SpanStore(os.path.join(tempfile.mkdtemp(), "ids.db"))
            for _ in range(0, prefill, 1000):
                store.add_dicts(records(1000, ids, per_trace, sessions))
        cpu: dict[str, list[float]] = {name: [] for name in makers}
        for r in range(rounds):
            for name in (list(makers) if r % 2 == 0 else list(makers)[::-1]):
                batches = [records(batch, makers[name], per_trace, sessions) for _ in range(per_round)]
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                for b in batches:
                    stores[name].add_dicts(b)
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                spent = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
                cpu[name].append(spent / (batch * per_round) * 1e6)
        label = f"{per_trace} span{'s' if per_trace > 1 else ''} per trace, {'in sessions' if sessions else 'no session'}"
        print(f"  {label:32}" + "".join(f"  {name} {statistics.median(v):5.1f}" for name, v in cpu.items()))


def history_cost(lengths: tuple[int, ...] = (4, 10, 20, 40), n: int = 3000) -> None:
    """What recording a call's conversation costs by its length: every LLM call records the
    whole conversation. LangChain messages are the same objects from call to call (the
    adapter keeps each one's JSON by object); OpenAI-format dicts (LiteLLM, the Agents SDK)
    are kept by content, so this also times them rebuilt for every call, as the Agents SDK
    does, and as they were written before the cache (every message anew). A conversation: system, user, then assistant tool calls and tool results in turn. Warm CPU
    us per call, best of 3."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from tracerl.adapters import _common
    from tracerl.adapters.langchain import _MessageJson
    from tracerl.core import _json

    def dicts(k: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant. Use the calculator."},
                                     {"role": "user", "content": "What is 12 + 30, times 2?"}]
        while len(out) < k:
            cid = f"call_{len(out)}"
            out.append({"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {
                "name": "calculator", "arguments": json.dumps({"expression": "12 + 30"})}}]})
            out.append({"role": "tool", "tool_call_id": cid, "content": "42"})
        return out[:k]

    def langchain(k: int) -> list[Any]:
        out: list[Any] = [SystemMessage("You are a helpful assistant. Use the calculator."),
                          HumanMessage("What is 12 + 30, times 2?")]
        while len(out) < k:
            cid = f"call_{len(out)}"
            out.append(AIMessage("", tool_calls=[{"id": cid, "name": "calculator", "args": {"expression": "12 + 30"}}]))
            out.append(ToolMessage("42", tool_call_id=cid))
        return out[:k]

    def best(fn: Callable[[int], Any]) -> float:
        times = []
        for _ in range(3):
            c0 = time.process_time()
            for i in range(n):
                fn(i)
            times.append((time.process_time() - c0) / n * 1e6)
        return min(times)

    print(f"recording a conversation: CPU us per call by its length, {n} calls, best of 3 (warm)")
    print(f"{'messages':>9} {'LangChain':>10} {'dicts kept':>11} {'dicts rebuilt':>14} {'uncached':>9}")
    def row(k: int) -> tuple[float, ...]:
        cache, lc, kept = _MessageJson(), langchain(k), dicts(k)
        rebuilt = [dicts(k) for _ in range(n)]  # made beforehand: their making is not timed
        return (best(lambda i: cache.json(lc)), best(lambda i: _common.openai_messages_json(kept, dicts_only=True)),
                best(lambda i: _common.openai_messages_json(rebuilt[i], dicts_only=True)),
                best(lambda i: _json.dumps([_common._openai_doc(m) for m in kept])))  # the code before the cache

    for k in lengths:
        print(f"{k:9} " + " ".join(f"{v:{w}.1f}" for v, w in zip(row(k), (10, 11, 14, 9))))


def _agents_caller(tracing: Any, messages: list[dict[str, Any]], n: int) -> Callable[[int], None]:
    """The Agents SDK processor's events for one LLM call, fed with the SDK's own span data
    in the order a recorded episode (agent, task, 2 turns, 2 generations, 1 tool call) gives
    them: odd calls open the episode and run the tool, even calls end it."""
    from dataclasses import dataclass

    from agents.tracing.span_data import (
        AgentSpanData,
        FunctionSpanData,
        GenerationSpanData,
        TaskSpanData,
        TurnSpanData,
    )

    from tracerl.adapters import _common
    from tracerl.adapters.openai_agents import TracerlTracingProcessor

    @dataclass
    class Span:  # what the processor reads of the SDK's spans
        trace_id: str
        span_id: str
        parent_id: str | None
        span_data: Any
        error: Any = None

    processor = TracerlTracingProcessor(_common.tracer(tracing, "openai_agents"))
    reply = {"role": "assistant", "content": None, "tool_calls": messages[2]["tool_calls"]}
    usage = {"input_tokens": 9, "output_tokens": 6}
    opened: dict[int, tuple[Span, Span]] = {}

    def call(i: int) -> None:
        episode, tid = i // 2 % n, f"trace_{i // 2 % n:032x}"

        def span(kind: str, parent: str | None, data: Any) -> Span:
            return Span(tid, f"span_{kind}_{episode}", parent, data)

        if i % 2 == 0:
            agent = span("agent", None, AgentSpanData("solver", tools=["calculator"]))
            task = span("task", agent.span_id, TaskSpanData("run"))
            turn = span("turn1", task.span_id, TurnSpanData(1, "solver"))
            gen = span("gen1", turn.span_id, GenerationSpanData(messages[1:2], [reply], "m", usage=usage))
            tool = span("tool", turn.span_id, FunctionSpanData("calculator", '{"expression": "12+30"}', "42"))
            opened[episode] = (agent, task)
            for s in (agent, task, turn, gen):
                processor.on_span_start(s)
            processor.on_span_end(gen)
            processor.on_span_start(tool)
            processor.on_span_end(tool)
            processor.on_span_end(turn)
        else:
            turn = span("turn2", f"span_task_{episode}", TurnSpanData(2, "solver"))
            gen = span("gen2", turn.span_id, GenerationSpanData(messages[1:], [{"role": "assistant",
                                                                               "content": "The answer is 42."}],
                                                               "m", usage=usage))
            for s in (turn, gen):
                processor.on_span_start(s)
            agent, task = opened.pop(episode)
            for s in (gen, turn, task, agent):
                processor.on_span_end(s)

    return call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", action="store_true", help="time the store's export instead of the callbacks")
    parser.add_argument("--ids", action="store_true", help="time store writes by id kind (random, time-ordered)")
    parser.add_argument("--history", action="store_true", help="time recording a conversation by its length")
    args = parser.parse_args()
    if args.history:
        history_cost()
    elif args.ids:
        store_ids()
    elif args.export:
        export_batches()
    else:
        callbacks_only()
    return 0


if __name__ == "__main__":
    sys.exit(main())
