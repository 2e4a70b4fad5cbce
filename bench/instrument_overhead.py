"""What the one adapter line costs an agent: wall time and CPU per LLM call.

Runs N episodes of a tool-calling math agent (2 LLM calls and a tool call each against the
scripted server, 1-3 calls against the tiny model) against the same OpenAI-compatible server in
another process, in four modes, interleaved in rounds (order rotated each round) so machine
noise hits all modes alike:

* ``none``: no instrumentation at all;
* ``hook``: a do-nothing hook on the extension point our adapter uses (a LangChain callback
  handler with our event filter, a LiteLLM CustomLogger, an Agents SDK TracingProcessor with
  the SDK's tracing on): what the framework itself spends per call once any hook is there, so
  ``tracerl`` minus ``hook`` is our code's share, measured in the same run;
* ``tracerl``: ``tracerl.instrument(FRAMEWORK)`` (spans to a SQLite store, W3C propagation);
* ``tracerl-no-content`` (only when asked for in ``--modes``): the same with
  ``capture_content=False``, no messages on our spans;
* ``floor`` (LangChain/LangGraph, only when asked for): the least an adapter whose span the
  gateway's joins must do at each call, and nothing more: fresh ids made current for the HTTP
  call (a non-recording span, attached in ``on_chat_model_start``, detached in ``on_llm_end``)
  and the W3C headers sent; no span recorded, nothing stored;
* ``openinference``: the OpenInference instrumentor for the framework instead (spans to the
  same kind of store), for comparison.

The server (``--server``) is tracerl.testing.ScriptedServer (instant answers: the worst case
for relative overhead; ``scripted-30ms``: the same answers after 30 ms idle, a remote
model's latency without its CPU here) or the real gateway serving the bundled tiny model on
CPU (greedy decoding, so every mode sends the same requests and gets the same answers).

    python bench/instrument_overhead.py --framework langgraph --runs 500
    python bench/instrument_overhead.py --framework litellm --server gateway --runs 60 --rounds 3
    python bench/instrument_overhead.py --server gateway --modes hook tracerl tracerl-no-content --account
    python bench/instrument_overhead.py --callbacks     # the adapters' own code alone (bench/adapter_parts.py)
    python bench/instrument_overhead.py --export        # span export by spans per SQLite commit
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

SERVERS = {
    # instant answers: the worst case for relative overhead
    "scripted": """
import sys
from tracerl.testing import ScriptedServer, calculator_script
with ScriptedServer(calculator_script, emit_spans=False) as s:
    print(s.url, flush=True)
    sys.stdin.read()
""",
    # the scripted answers after 30 ms of idling: a model's latency without its CPU on this
    # machine (as a model served from elsewhere), to tell a cold wake-up from cache trashing
    "scripted-30ms": """
import sys, time
from tracerl.testing import ScriptedServer, calculator_script
def script(messages, tools):
    time.sleep(0.03)
    return calculator_script(messages, tools)
with ScriptedServer(script, emit_spans=False) as s:
    print(s.url, flush=True)
    sys.stdin.read()
""",
    # the real gateway serving the bundled tiny model (greedy, so every mode does the same work)
    "gateway": """
import sys, tempfile, os
import tracerl
from tracerl.engines.torch_engine import TorchEngine
engine = TorchEngine(num_threads=1)
with tracerl.GatewayServer(engine, os.path.join(tempfile.mkdtemp(), "gateway.db")) as gw:
    print(gw.url, flush=True)
    sys.stdin.read()
engine.shutdown()
""",
}
QUESTION = "What is {a} + {b}?"
MAX_CALLS = 3
TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an integer expression with + - * and parentheses.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]
Agent = Callable[[str], tuple[str, int]]  # question -> (answer, LLM calls made)


def _calculator(arguments: Any) -> str:
    from tracerl.tasks.synthetic import calculator

    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        return calculator(str(args.get("expression", "")))
    except (ValueError, AttributeError, TypeError) as exc:
        return f"error: {exc}"


def langgraph_agent(base_url: str, model: str) -> Agent:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an integer expression with + - * and parentheses."""
        return _calculator({"expression": expression})

    llm = ChatOpenAI(model=model, base_url=base_url, api_key="x", temperature=0.0, max_tokens=32)
    agent = create_react_agent(llm, [calculator])

    def run(q: str) -> tuple[str, int]:
        messages = agent.invoke({"messages": [("user", q)]}, {"recursion_limit": 2 * MAX_CALLS})["messages"]
        return str(messages[-1].content), sum(1 for m in messages if m.type == "ai")

    return run


def langchain_agent(base_url: str, model: str) -> Agent:
    from langchain_core.messages import ToolMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=model, base_url=base_url, api_key="x", temperature=0.0, max_tokens=32).bind_tools(TOOLS)

    def run(q: str) -> tuple[str, int]:
        messages: list[Any] = [("user", q)]
        n = 0
        while n < MAX_CALLS:
            reply, n = llm.invoke(messages), n + 1
            messages.append(reply)
            if not reply.tool_calls:
                break
            messages += [ToolMessage(_calculator(c["args"]), tool_call_id=c["id"]) for c in reply.tool_calls]
        return str(reply.content), n

    return run


def litellm_agent(base_url: str, model: str) -> Agent:
    import litellm

    def run(q: str) -> tuple[str, int]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": q}]
        n = 0
        while n < MAX_CALLS:
            reply = litellm.completion(model=f"openai/{model}", api_base=base_url, api_key="x", messages=messages,
                                       tools=TOOLS, temperature=0.0, max_tokens=32).choices[0].message
            n += 1
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                break
            for tc in reply.tool_calls:
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": _calculator(tc.function.arguments)})
        return reply.content or "", n

    return run


def openai_agents_agent(base_url: str, model: str) -> Agent:
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
    from agents.exceptions import MaxTurnsExceeded
    from openai import AsyncOpenAI

    @function_tool
    def calculator(expression: str) -> str:
        """Evaluate an integer expression with + - * and parentheses."""
        return _calculator({"expression": expression})

    client = AsyncOpenAI(base_url=base_url, api_key="x")
    agent = Agent(name="solver", tools=[calculator], model=OpenAIChatCompletionsModel(model=model, openai_client=client),
                  model_settings=ModelSettings(temperature=0.0, max_tokens=32))
    loop = asyncio.new_event_loop()  # one loop for the client's connections

    def run(q: str) -> tuple[str, int]:
        try:
            result = loop.run_until_complete(Runner.run(agent, q, max_turns=MAX_CALLS))
        except MaxTurnsExceeded:
            return "", MAX_CALLS
        return str(result.final_output), len(result.raw_responses)

    return run


MODES = ("none", "hook", "tracerl", "tracerl-no-content", "floor", "openinference")
OURS = ("tracerl", "tracerl-no-content", "floor")
OPT_IN = ("tracerl-no-content", "floor")
AGENTS = {"langgraph": langgraph_agent, "langchain": langchain_agent, "litellm": litellm_agent,
          "openai-agents": openai_agents_agent}
OPENINFERENCE = {
    "langgraph": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "langchain": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "litellm": ("openinference.instrumentation.litellm", "LiteLLMInstrumentor"),
    "openai-agents": ("openinference.instrumentation.openai_agents", "OpenAIAgentsInstrumentor"),
}


def _noop_hook(framework: str) -> Callable[[], None]:
    """Register a do-nothing hook on the extension point our adapter uses (what the framework
    itself spends per call once any hook is there); returns its undo."""
    if framework in ("langgraph", "langchain"):
        return _langchain_hook(_filtered_handler()())
    if framework == "litellm":
        import litellm
        from litellm.integrations.custom_logger import CustomLogger

        logger = CustomLogger()
        litellm.logging_callback_manager.add_litellm_callback(logger)
        return lambda: litellm.logging_callback_manager.remove_callback_from_all_lists(logger)
    from agents.tracing import TracingProcessor, get_trace_provider

    class NoopProcessor(TracingProcessor):
        def on_trace_start(self, trace: Any) -> None: ...
        def on_trace_end(self, trace: Any) -> None: ...
        def on_span_start(self, span: Any) -> None: ...
        def on_span_end(self, span: Any) -> None: ...
        def shutdown(self) -> None: ...
        def force_flush(self) -> None: ...

    provider = get_trace_provider()
    before = tuple(provider._multi_processor._processors)
    provider.set_processors([NoopProcessor()])
    provider.set_disabled(False)  # as our adapter does: the SDK builds its traces again

    def undo() -> None:
        provider.set_processors(list(before))
        provider.set_disabled(True)

    return undo


def _langchain_hook(handler: Any) -> Callable[[], None]:
    """Register ``handler`` as tracerl's adapter does (the default of a configure-hook variable,
    so every thread and task sees it); returns its undo."""
    from contextvars import ContextVar

    from langchain_core.tracers.context import _configure_hooks, register_configure_hook

    register_configure_hook(ContextVar(f"bench_{type(handler).__name__}", default=handler), True)
    hook = _configure_hooks[-1]
    return lambda: _configure_hooks.remove(hook)


@functools.cache
def _filtered_handler() -> type:
    """A do-nothing LangChain handler with our adapter's event filter: LLM and tool events only."""
    from langchain_core.callbacks import BaseCallbackHandler

    class Noop(BaseCallbackHandler):
        run_inline, ignore_chain, ignore_retriever, ignore_retry, ignore_custom_event = True, True, True, True, True

    return Noop


@functools.cache
def _floor_handler() -> type:
    """The ``floor`` mode's LangChain handler: fresh ids made current around each LLM call (so
    tracerl's header injection sends a ``traceparent``), nothing recorded."""
    import random

    from opentelemetry import context, trace

    class FloorHandler(_filtered_handler()):
        def __init__(self) -> None:
            self.tokens: dict[Any, object] = {}

        def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any) -> None:
            ids = trace.SpanContext(random.getrandbits(128), random.getrandbits(64), False, trace.TraceFlags(1))
            self.tokens[run_id] = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(ids)))

        def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
            token = self.tokens.pop(run_id, None)
            if token is not None:
                context.detach(token)

    return FloorHandler


def _floor_hook() -> Callable[[], None]:
    """Register the ``floor`` handler and tracerl's W3C header injection; returns their undo."""
    from tracerl.adapters import _common

    remove = _langchain_hook(_floor_handler()())
    _common.enable_http_propagation("bench-floor")

    def undo() -> None:
        remove()
        _common.disable_http_propagation("bench-floor")

    return undo


class Mode:
    """Switches one instrumentation on for a round and off again."""

    def __init__(self, name: str, framework: str, db: str):
        self.name, self.framework, self.db = name, framework, db
        self._oi: Any = None
        self._undo: Callable[[], None] | None = None

    def __enter__(self) -> Mode:
        import tracerl

        if self.name == "hook":
            self._undo = _noop_hook(self.framework)
        elif self.name == "floor":
            self._undo = _floor_hook()
        elif self.name in OURS:
            tracerl.instrument(self.framework, store=self.db, capture_content=self.name == "tracerl")
        elif self.name == "openinference":
            import importlib

            module, cls = OPENINFERENCE[self.framework]
            self._oi = getattr(importlib.import_module(module), cls)()
            self._oi.instrument(tracer_provider=tracerl.setup_tracing(self.db).provider)
        return self

    def __exit__(self, *exc: object) -> None:
        import tracerl

        if self._undo is not None:
            self._undo()
        elif self.name in OURS:
            tracerl.uninstrument(self.framework)
        elif self._oi is not None:
            self._oi.uninstrument()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(AGENTS), default="langgraph")
    parser.add_argument("--server", choices=sorted(SERVERS), default="scripted",
                        help="scripted: instant answers (worst case); scripted-30ms: the same after 30 ms idle; "
                             "gateway: the tiny model behind the gateway")
    parser.add_argument("--runs", type=int, default=500, help="episodes per mode")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per mode")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=[m for m in MODES if m not in OPT_IN],
                        help="modes to run (none is always run: the baseline)")
    parser.add_argument("--account", action="store_true",
                        help="also count ours in situ: thread CPU inside our callbacks and export threads")
    parser.add_argument("--export", action="store_true",
                        help="only time the store's span export by spans per SQLite commit")
    parser.add_argument("--callbacks", action="store_true",
                        help="only time the adapters' callbacks (no framework, no HTTP); see callbacks_only()")
    parser.add_argument("--prefill", type=int, default=0, metavar="N",
                        help="first store N spans from earlier runs, as a store in use holds (default: an empty one)")
    args = parser.parse_args()
    if "floor" in args.modes and args.framework not in ("langgraph", "langchain"):
        parser.error("--modes floor is for --framework langchain or langgraph")
    if args.callbacks or args.export:  # the parts alone: see adapter_parts.py
        import adapter_parts

        adapter_parts.callbacks_only() if args.callbacks else adapter_parts.export_batches()
        return 0

    server = subprocess.Popen([sys.executable, "-c", SERVERS[args.server]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    base_url = server.stdout.readline().strip() + "/v1"  # type: ignore[union-attr]
    db = os.path.join(tempfile.mkdtemp(), "overhead.db")
    import tracerl  # noqa: F401 - imported before timing, like an app would

    if args.prefill:
        _prefill(db, args.prefill)

    scripted = args.server.startswith("scripted")
    agent = AGENTS[args.framework](base_url, "scripted" if scripted else "tracerl-tiny")
    agent(QUESTION.format(a=1, b=1))  # warm up imports and connections
    per_round = max(1, args.runs // args.rounds)
    modes = ("none", *(m for m in MODES if m in args.modes and m != "none"))
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    calls: dict[str, int] = dict.fromkeys(modes, 0)
    gc_s: dict[str, float] = dict.fromkeys(modes, 0.0)
    gc_timer = _GcTimer()
    account = _Account(args.framework, gc_timer) if args.account else None
    answers: dict[str, list[str]] = {m: [] for m in modes}
    try:
        for r in range(args.rounds):
            for name in modes[r % len(modes):] + modes[:r % len(modes)]:  # rotated: no mode always follows another
                with Mode(name, args.framework, db):
                    if account is not None:
                        account.begin("untimed")
                    agent(QUESTION.format(a=r, b=1))  # first call after switching is not timed
                    _flush()
                    gc.collect()  # a collection the previous mode's garbage made due is not charged here
                    if account is not None:
                        account.begin(name)
                    t0, c0, g0 = time.perf_counter(), time.process_time(), gc_timer.total
                    for i in range(per_round):
                        answer, n = agent(QUESTION.format(a=i, b=r))
                        calls[name] += n
                        answers[name].append(answer)
                    # this round's spans are exported (and their CPU counted) in this round
                    if account is None:
                        _flush()
                    else:
                        from tracerl.core import deferred

                        account.measure(name, "span replay (final flush)", deferred.drain)
                        # force_flush exports on this thread what is left
                        account.measure(name, "span export (final flush)", _flush)
                    wall[name].append(time.perf_counter() - t0)
                    cpu[name].append(time.process_time() - c0)
                    gc_s[name] += gc_timer.total - g0
                    if account is not None:
                        account.end(name)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=30)
    if scripted:
        assert all(a.startswith("The answer is") for a in answers["none"]), answers["none"][:3]
    # Greedy decoding: instrumentation must not change what the agent does.
    same = all(answers[m] == answers["none"] for m in modes)
    per_call = {m: calls[m] / args.rounds for m in modes}  # LLM calls per round
    base_wall, base_cpu = statistics.median(wall["none"]), statistics.median(cpu["none"])
    print(f"{args.framework} vs {args.server}: {per_round} episodes x {args.rounds} rounds per mode, "
          f"{per_call['none']:.0f} LLM calls per round; same answers in every mode: {same}")
    print(f"{'mode':14} {'wall s/round':>12} {'overhead':>9} {'CPU us/call':>12} {'+CPU us/call':>13} "
          f"{'GC us/call':>11}")
    for name in modes:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{name:14} {w:12.3f} {100 * (w - base_wall) / base_wall:8.1f}% {c / per_call[name] * 1e6:12.0f} "
              f"{(c / per_call[name] - base_cpu / per_call['none']) * 1e6:13.0f} {gc_s[name] / calls[name] * 1e6:11.0f}")
    for mode in OURS:
        if "hook" in modes and mode in modes:
            _print_paired(cpu, calls, args.rounds, mode)
    if account is not None:
        account.report(calls, gc_s, base_cpu / per_call["none"] * 1e6)
    return 0


def _prefill(db: str, n: int) -> None:
    """``n`` chat spans of 700 characters of messages, one per trace, written to ``db`` the way
    this version of tracerl writes spans (its ids included) on a provider of their own: a store
    in use holds the spans of earlier runs (the default one, ~/.tracerl/traces.db, is kept)."""
    from opentelemetry.sdk.trace import TracerProvider

    import tracerl

    tracing = tracerl.setup_tracing(db, tracer_provider=TracerProvider())
    tracer = tracing.tracer("tracerl.bench.prefill")
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": "x" * 600,
             "gen_ai.output.messages": "y" * 100}
    for i in range(n):
        tracer.start_span("chat m", attributes=attrs).end()
        if i % 5000 == 4999:
            tracing.flush()
    tracing.flush()


def _flush() -> None:
    from tracerl.core.otel import tracing_state

    state = tracing_state()
    if state is not None:
        state.flush()


class _Account:
    """Ours in situ, counted rather than subtracted: the thread CPU time spent inside each of
    our adapter's entry points (the callbacks the framework calls, the W3C header injection)
    and on the span export threads, per mode, and the garbage collector's time beyond the hook
    mode's. A collection that runs inside our code is counted once, as collection: the
    callbacks' figures exclude it (the export threads' do not: a small overlap). Two clock
    reads per callback (~0.4 us each) are included, so this slightly overstates our share."""

    def __init__(self, framework: str, gc_timer: _GcTimer):
        from tracerl.adapters import _common

        self.cpu: dict[tuple[str, str], float] = {}
        self._mode = ""
        self._gc = gc_timer
        self._wrap(_common, "_inject", "inject W3C headers")
        cls, prefixes = self._entry_points(framework)
        classes = (cls, _floor_handler()) if framework in ("langgraph", "langchain") else (cls,)
        for owner in classes:
            for attr in list(vars(owner)):
                if attr.startswith(prefixes) and callable(getattr(owner, attr)):
                    self._wrap(owner, attr, attr)

    @staticmethod
    def _entry_points(framework: str) -> tuple[Any, tuple[str, ...]]:
        if framework in ("langgraph", "langchain"):
            from tracerl.adapters.langchain import TracerlCallbackHandler

            return TracerlCallbackHandler, ("on_",)
        if framework == "litellm":
            from tracerl.adapters.litellm import TracerlLiteLLMLogger

            return TracerlLiteLLMLogger, ("log_", "async_log_")
        from tracerl.adapters.openai_agents import TracerlTracingProcessor

        return TracerlTracingProcessor, ("on_",)

    def _wrap(self, owner: Any, attr: str, label: str) -> None:
        import inspect

        original = getattr(owner, attr)
        if inspect.iscoroutinefunction(original):  # LiteLLM's async hooks (ours never await inside)
            @functools.wraps(original)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                start = self._clock()
                try:
                    return await original(*args, **kwargs)
                finally:
                    self.add(self._mode, label, self._since(start))

            setattr(owner, attr, timed_async)
            return

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = self._clock()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(self._mode, label, self._since(start))

        setattr(owner, attr, timed)

    @staticmethod
    def _export_threads_cpu() -> float:
        import threading

        total = 0.0
        for t in threading.enumerate():
            if t.name.startswith(("OtelBatchSpan", "tracerl-span")) and t.ident is not None:
                with contextlib.suppress(OSError):  # the thread just ended
                    total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        return total

    def _clock(self) -> tuple[float, float]:
        return time.thread_time(), self._gc.total

    def _since(self, start: tuple[float, float]) -> float:
        """This thread's CPU since ``start``, less the collections that ran meanwhile (they
        are counted once, in the collector's line)."""
        return time.thread_time() - start[0] - (self._gc.total - start[1])

    def measure(self, mode: str, label: str, fn: Callable[[], Any]) -> None:
        start = self._clock()
        fn()
        self.add(mode, label, self._since(start))

    def add(self, mode: str, label: str, seconds: float) -> None:
        self.cpu[(mode, label)] = self.cpu.get((mode, label), 0.0) + seconds

    def begin(self, mode: str) -> None:
        self._mode = mode
        self._export0 = self._export_threads_cpu()

    def end(self, mode: str) -> None:
        self.add(mode, "span export threads", self._export_threads_cpu() - self._export0)

    def report(self, calls: dict[str, int], gc_s: dict[str, float], framework_us: float) -> None:
        """Per mode, each part per LLM call, and the whole as a share of ``framework_us``, the
        ``none`` mode's CPU per call (how warm the machine runs moves both alike: after an
        idle wait the framework's own code costs twice as much, ours too). The collector's
        time beyond the hook mode's is ours too: spans and whatever they hold alive until
        exported make collections come sooner, and that cost falls on whichever code
        allocates next, mostly the framework's."""
        for mode in OURS:
            if calls.get("hook") and calls.get(mode):
                extra = gc_s[mode] / calls[mode] - gc_s["hook"] / calls["hook"]
                self.add(mode, "garbage collection (> hook)", extra * calls[mode])
        print("\nours in situ, counted (thread CPU inside our code and on the export threads, and the"
              " garbage collector's time beyond the hook mode's), us per LLM call:")
        for mode in ("hook", *OURS):
            parts = {label: v for (m, label), v in self.cpu.items() if m == mode and calls.get(mode)}
            if not parts:
                continue
            per_call = sum(parts.values()) / calls[mode] * 1e6
            print(f"  {mode}: {per_call:.0f} in all, {100 * per_call / framework_us:.1f} % of the framework's "
                  f"own {framework_us:,.0f} (the none mode's CPU per call)")
            for label, v in sorted(parts.items(), key=lambda kv: -kv[1]):
                print(f"    {label:28} {v / calls[mode] * 1e6:7.1f}")


class _GcTimer:
    """Seconds the garbage collector ran (any thread): part of the CPU figures, shown apart
    because a mode that keeps objects alive longer makes the collector's full passes come
    sooner for everyone."""

    def __init__(self) -> None:
        self.total, self._t0 = 0.0, 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t0


def _print_paired(cpu: dict[str, list[float]], calls: dict[str, int], rounds: int, mode: str) -> None:
    """Ours in situ, round by round: ``mode`` - hook CPU per LLM call within each round (the two
    ran back to back under the same machine load), so slow drifts in load cancel."""
    diffs = sorted((t / (calls[mode] / rounds) - h / (calls["hook"] / rounds)) * 1e6
                   for t, h in zip(cpu[mode], cpu["hook"], strict=True))
    q = statistics.quantiles(diffs, n=4) if len(diffs) >= 4 else [diffs[0], statistics.median(diffs), diffs[-1]]
    print(f"ours in situ ({mode} - hook, paired by round): median {statistics.median(diffs):.0f} us/call, "
          f"quartiles {q[0]:.0f} .. {q[2]:.0f}, mean {statistics.fmean(diffs):.0f} over {len(diffs)} rounds")


if __name__ == "__main__":
    sys.exit(main())
