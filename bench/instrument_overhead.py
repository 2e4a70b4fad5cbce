"""What the one adapter line costs an agent: wall time and CPU per LLM call.

Runs episodes of a tool-calling math agent (1-3 LLM calls and tool calls each) against an
OpenAI-compatible server in another process, in modes interleaved in rounds (the order
rotated each round, so machine noise hits every mode alike):

* ``none``: no instrumentation at all (the baseline);
* ``tracerl``: ``tracerl.instrument(FRAMEWORK)`` (SDK spans to a SQLite store through a
  batching processor, W3C propagation);
* ``tracerl-no-content``: the same with ``capture_content=False``;
* ``openinference``: the OpenInference instrumentor for the framework instead (spans to the
  same kind of store), for comparison.

``--server gateway`` (the default) is the real gateway serving the bundled tiny model, greedy,
so every mode does the same work (checked: the answers must be equal in every mode);
``--server scripted`` answers at once (tracerl.testing.ScriptedServer), the worst case for
relative overhead. Results: docs/performance.md.

    python bench/instrument_overhead.py --framework langgraph
    python bench/instrument_overhead.py --framework litellm --server scripted --runs 1000
"""

from __future__ import annotations

import argparse
import asyncio
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


MODES = ("none", "tracerl", "tracerl-no-content", "openinference")
AGENTS = {"langgraph": langgraph_agent, "langchain": langchain_agent, "litellm": litellm_agent,
          "openai-agents": openai_agents_agent}
OPENINFERENCE = {
    "langgraph": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "langchain": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "litellm": ("openinference.instrumentation.litellm", "LiteLLMInstrumentor"),
    "openai-agents": ("openinference.instrumentation.openai_agents", "OpenAIAgentsInstrumentor"),
}


class Mode:
    """Switches one instrumentation on for a round and off again."""

    def __init__(self, name: str, framework: str, db: str):
        self.name, self.framework, self.db = name, framework, db
        self._oi: Any = None

    def __enter__(self) -> Mode:
        import tracerl

        if self.name.startswith("tracerl"):
            tracerl.instrument(self.framework, store=self.db, capture_content=self.name == "tracerl")
        elif self.name == "openinference":
            import importlib

            module, cls = OPENINFERENCE[self.framework]
            self._oi = getattr(importlib.import_module(module), cls)()
            self._oi.instrument(tracer_provider=tracerl.setup_tracing(self.db).provider)
        return self

    def __exit__(self, *exc: object) -> None:
        import tracerl

        if self.name.startswith("tracerl"):
            tracerl.uninstrument(self.framework)
        elif self._oi is not None:
            self._oi.uninstrument()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(AGENTS), default="langgraph")
    parser.add_argument("--server", choices=sorted(SERVERS), default="gateway",
                        help="gateway: the tiny model behind the gateway; scripted: instant answers (worst case)")
    parser.add_argument("--runs", type=int, default=200, help="episodes per mode")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per mode")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                        help="modes to run (none is always run: the baseline)")
    args = parser.parse_args()

    server = subprocess.Popen([sys.executable, "-c", SERVERS[args.server]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    base_url = server.stdout.readline().strip() + "/v1"  # type: ignore[union-attr]
    db = os.path.join(tempfile.mkdtemp(), "overhead.db")
    import tracerl  # noqa: F401 - imported before timing, like an app would

    scripted = args.server == "scripted"
    agent = AGENTS[args.framework](base_url, "scripted" if scripted else "tracerl-tiny")
    agent(QUESTION.format(a=1, b=1))  # warm up imports and connections
    per_round = max(1, args.runs // args.rounds)
    modes = ("none", *(m for m in MODES if m in args.modes and m != "none"))
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    calls: dict[str, int] = dict.fromkeys(modes, 0)
    answers: dict[str, list[str]] = {m: [] for m in modes}
    try:
        for r in range(args.rounds):
            for name in modes[r % len(modes):] + modes[:r % len(modes)]:  # rotated: no mode always follows another
                with Mode(name, args.framework, db):
                    agent(QUESTION.format(a=r, b=1))  # the first call after switching is not timed
                    _flush()
                    gc.collect()  # a collection the previous mode's garbage made due is not charged here
                    t0, c0 = time.perf_counter(), time.process_time()
                    for i in range(per_round):
                        answer, n = agent(QUESTION.format(a=i, b=r))
                        calls[name] += n
                        answers[name].append(answer)
                    _flush()  # this round's spans are exported (and their CPU counted) in this round
                    wall[name].append(time.perf_counter() - t0)
                    cpu[name].append(time.process_time() - c0)
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
    print("| mode | wall s/round | wall overhead | CPU us/call | +CPU us/call |\n| --- | ---: | ---: | ---: | ---: |")
    for name in modes:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"| {name} | {w:.3f} | {100 * (w - base_wall) / base_wall:.1f} % | {c / per_call[name] * 1e6:.0f} | "
              f"{(c / per_call[name] - base_cpu / per_call['none']) * 1e6:.0f} |")
    return 0


def _flush() -> None:
    from tracerl.core.otel import tracing_state

    state = tracing_state()
    if state is not None:
        state.flush()


if __name__ == "__main__":
    sys.exit(main())
