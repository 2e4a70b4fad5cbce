"""What the one adapter line costs an agent: wall time and CPU per LLM call.

Runs N agent episodes (a tool-calling math agent: 2 LLM calls and a tool call each) against
the same OpenAI-compatible server in another process, in three modes, interleaved in rounds so
machine noise hits all modes alike:

* ``none``: no instrumentation at all;
* ``tracerl``: ``tracerl.instrument(FRAMEWORK)`` (spans to a SQLite store, W3C propagation);
* ``openinference``: the OpenInference instrumentor for the framework instead (spans to the
  same kind of store), for comparison.

The server is tracerl.testing.ScriptedServer (instant answers), so the figures are the worst
case: with a real model each call takes far longer and the relative overhead shrinks.

    python bench/instrument_overhead.py --framework langgraph --runs 500
    python bench/instrument_overhead.py --framework litellm
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

SERVER = """
import sys, time
from tracerl.testing import ScriptedServer, calculator_script
with ScriptedServer(calculator_script, emit_spans=False) as s:
    print(s.url, flush=True)
    sys.stdin.read()
"""
QUESTION = "What is {a}+{b}?"


def langgraph_agent(base_url: str) -> Any:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def calculator(expression: str) -> str:
        """Evaluate a+b."""
        a, b = expression.split("+")
        return str(int(a) + int(b))

    agent = create_react_agent(ChatOpenAI(model="scripted", base_url=base_url, api_key="x"), [calculator])
    return lambda q: agent.invoke({"messages": [("user", q)]})["messages"][-1].content


def litellm_agent(base_url: str) -> Any:
    import litellm

    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {
        "type": "object", "properties": {"expression": {"type": "string"}}}}}]

    def run(q: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": q}]
        for _ in range(3):
            reply = litellm.completion(model="openai/scripted", api_base=base_url, api_key="x",
                                       messages=messages, tools=tools).choices[0].message
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return reply.content
            for tc in reply.tool_calls:
                a, b = __import__("json").loads(tc.function.arguments)["expression"].split("+")
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": str(int(a) + int(b))})
        return ""

    return run


AGENTS = {"langgraph": langgraph_agent, "litellm": litellm_agent}
OPENINFERENCE = {
    "langgraph": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "litellm": ("openinference.instrumentation.litellm", "LiteLLMInstrumentor"),
}


class Mode:
    """Switches one instrumentation on for a round and off again."""

    def __init__(self, name: str, framework: str, db: str):
        self.name, self.framework, self.db = name, framework, db
        self._oi: Any = None

    def __enter__(self) -> Mode:
        import tracerl

        if self.name == "tracerl":
            tracerl.instrument(self.framework, store=self.db)
        elif self.name == "openinference":
            import importlib

            module, cls = OPENINFERENCE[self.framework]
            self._oi = getattr(importlib.import_module(module), cls)()
            self._oi.instrument(tracer_provider=tracerl.setup_tracing(self.db).provider)
        return self

    def __exit__(self, *exc: object) -> None:
        import tracerl

        if self.name == "tracerl":
            tracerl.uninstrument(self.framework)
        elif self._oi is not None:
            self._oi.uninstrument()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(AGENTS), default="langgraph")
    parser.add_argument("--runs", type=int, default=500, help="episodes per mode")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per mode")
    args = parser.parse_args()

    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base_url = server.stdout.readline().strip() + "/v1"  # type: ignore[union-attr]
    db = os.path.join(tempfile.mkdtemp(), "overhead.db")
    import tracerl  # noqa: F401 - imported before timing, like an app would

    agent = AGENTS[args.framework](base_url)
    agent(QUESTION.format(a=1, b=1))  # warm up imports and connections
    per_round = max(1, args.runs // args.rounds)
    wall: dict[str, list[float]] = {m: [] for m in ("none", "tracerl", "openinference")}
    cpu: dict[str, list[float]] = {m: [] for m in wall}
    try:
        for r in range(args.rounds):
            for name in wall:
                with Mode(name, args.framework, db):
                    agent(QUESTION.format(a=r, b=1))  # first call after switching is not timed
                    t0, c0 = time.perf_counter(), time.process_time()
                    for i in range(per_round):
                        answer = agent(QUESTION.format(a=i, b=r))
                        assert answer and answer.startswith("The answer is"), answer
                    wall[name].append(time.perf_counter() - t0)
                    cpu[name].append(time.process_time() - c0)
            asyncio.run(asyncio.sleep(0))
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=10)
    calls = per_round * 2  # two LLM calls per episode
    base_wall, base_cpu = statistics.median(wall["none"]), statistics.median(cpu["none"])
    print(f"{args.framework}: {per_round} episodes x {args.rounds} rounds per mode, {calls} LLM calls per round")
    print(f"{'mode':14} {'wall s/round':>12} {'overhead':>9} {'CPU us/call':>12} {'+CPU us/call':>13}")
    for name in wall:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{name:14} {w:12.3f} {100 * (w - base_wall) / base_wall:8.1f}% {c / calls * 1e6:12.0f} "
              f"{(c - base_cpu) / calls * 1e6:13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
