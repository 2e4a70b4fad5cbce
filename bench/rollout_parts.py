"""Where a one-call episode's rollout time goes, with an instant engine: tracerl's own part.

    .venv/bin/python bench/rollout_parts.py [--episodes 64] [--steps 8] [--concurrency 64]

An engine that answers at once (``InstantEngine``: the same tokens, "The answer is 4.", tokenized
once) sits behind the in-process gateway, as in training; ``run_rollouts`` runs ``--episodes`` one-call
episodes a step, ``--steps`` times, as the trainer does, and each part is the process's CPU
(and wall) per episode, median over the steps:

  whole        bench/short_agent.py's agent (the shared OpenAI client, one call): all of it
  async        the same agent written async (the shared AsyncOpenAI client, one event loop)
  http-agent   tracerl's built-in HTTP agent (httpx, one client per episode), the same call
  session      an agent that makes no call: the session, its spans, the episode read back
  assembly     of the session: whole's episodes read back from the store and converted, again
  gateway      the gateway's server side alone: its CPU per request from its own thread
               (``time.thread_time`` of uvicorn's thread)
  client       whole - session - gateway: the agent's client and the threads taking turns
  langgraph    examples/math_agent_langgraph.py (one model call: the engine never asks for the
               tool), instrumented by ``tracerl.instrument("langgraph")``, and again with the
               adapter out (``bare``); their difference is tracerl's adapter, and bare - session -
               gateway is LangGraph's and LangChain's own CPU with their OpenAI client

Writes nothing; prints one Markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tracerl  # noqa: E402
from tracerl.core.convert import episode_from_spans  # noqa: E402
from tracerl.core.otel import setup_tracing  # noqa: E402
from tracerl.core.rollout import RolloutSettings  # noqa: E402
from tracerl.core.store import SpanStore  # noqa: E402
from tracerl.gateway.server import GatewayServer  # noqa: E402
from tracerl.tasks.synthetic import TASKS  # noqa: E402
from tracerl.testing import ScriptedEngine  # noqa: E402
from tracerl.trainers.rollouts import run_rollouts  # noqa: E402


class InstantEngine(ScriptedEngine):
    """ScriptedEngine's reply, tokenized once: no engine work is left in the gateway's CPU
    (ScriptedEngine decodes each prompt and encodes its reply, ~0.3 ms a call)."""

    async def generate(self, prompt_ids: list[int], params: Any) -> list[Any]:
        if not hasattr(self, "_reply"):
            self._reply = await super().generate(prompt_ids, params)
        return [dataclasses.replace(g, token_ids=list(g.token_ids), logprobs=list(g.logprobs)) for g in self._reply]


@tracerl.rollout
def no_call(task: tracerl.Task, config: tracerl.RolloutContext) -> float:
    return 1.0


def _server_thread_cpu(gw: GatewayServer) -> float:
    """CPU seconds of the gateway server's thread so far (Linux: /proc/self/task/TID/stat)."""
    tid = getattr(gw, "_thread", None)
    native = getattr(tid, "native_id", None)
    if native is None:
        return float("nan")
    fields = Path(f"/proc/self/task/{native}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def measure(agent: Any, gw: GatewayServer, store: SpanStore, tracing: Any, args: argparse.Namespace,
            label: str) -> dict[str, float]:
    spec = TASKS["arithmetic"]
    settings = RolloutSettings(gateway_url=gw.url, session_path=True, model="scripted", max_tokens=8,
                               store=store.path, timeout_s=120.0)
    cpu, wall, server, assembly = [], [], [], []
    for step in range(args.steps + 1):  # the first is a warm-up
        tasks = spec.tasks("train", args.episodes, seed=step)
        jobs = [(t, f"{label}-{step}-{i}", settings) for i, t in enumerate(tasks)]
        c0, w0, s0 = time.process_time(), time.perf_counter(), _server_thread_cpu(gw)
        episodes = run_rollouts(agent, jobs, tracing=tracing, concurrency=args.concurrency)
        if step:
            cpu.append((time.process_time() - c0) / len(jobs))
            wall.append((time.perf_counter() - w0) / len(jobs))
            server.append((_server_thread_cpu(gw) - s0) / len(jobs))
            assembly.append(_assembly_cpu(store, jobs))
        ok = "no_llm_calls" if agent is no_call else "success"
        bad = [ep for ep in episodes if ep.termination_reason.value != ok]
        if bad:
            raise SystemExit(f"{label}: {len(bad)} episodes failed, e.g. {bad[0].termination_reason} {bad[0].error}")
    return {"cpu": statistics.median(cpu), "wall": statistics.median(wall), "server": statistics.median(server),
            "assembly": statistics.median(assembly)}


def _assembly_cpu(store: SpanStore, jobs: list[Any]) -> float:
    """CPU per episode of what Session.episode does after its flush, done again apart: the
    episode's spans read back from the store and converted."""
    c0 = time.process_time()
    for task, episode_id, _ in jobs:
        episode_from_spans(store.spans(session_id=episode_id), episode_id=episode_id, task=task)
    return (time.process_time() - c0) / len(jobs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=64)
    args = p.parse_args()
    import short_agent
    from transformers import AutoTokenizer

    from tracerl.models import tiny_model_path
    from tracerl.tasks.agents import math_agent

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    engine = InstantEngine(tok, lambda prompt: "The answer is 4.", model_name="scripted")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        store = SpanStore(str(Path(tmp) / "traces.db"))
        tracing = setup_tracing(use_store=False)
        tracing.store(store)
        with GatewayServer(engine, store) as gw:
            rows = {name: measure(agent, gw, store, tracing, args, name) for name, agent in
                    (("whole", short_agent.solve), ("async", short_agent.solve_async),
                                                      ("http-agent", math_agent), ("session", no_call))}
            rows.update(langgraph_rows(gw, store, tracing, args))
    whole, session = rows["whole"], rows["session"]
    print(f"| part | CPU ms per episode | wall ms per episode ({args.episodes} episodes, concurrency "
          f"{args.concurrency}) |")
    print("| --- | ---: | ---: |")
    for name, r in rows.items():
        print(f"| {name} | {r['cpu'] * 1e3:.2f} | {r['wall'] * 1e3:.2f} |")
    print(f"| gateway (server thread, in whole) | {whole['server'] * 1e3:.2f} | |")
    print(f"| episode assembly (read back and converted, in session; whole's episodes) | "
          f"{whole['assembly'] * 1e3:.2f} | |")
    client = whole["cpu"] - session["cpu"] - whole["server"]
    print(f"| client and turn-taking (whole - session - gateway) | {client * 1e3:.2f} | |")
    graph, bare = rows["langgraph"], rows["langgraph-bare"]
    adapter = graph["cpu"] - bare["cpu"]
    print(f"| langgraph adapter (langgraph - langgraph-bare) | {adapter * 1e3:.2f} | |")
    print(f"| LangGraph + LangChain + OpenAI client (bare - session - gateway) | "
          f"{(bare['cpu'] - session['cpu'] - bare['server']) * 1e3:.2f} | |")
    print(f"| tracerl's part of a LangGraph call (session + gateway + adapter) | "
          f"{(session['cpu'] + graph['server'] + adapter) * 1e3:.2f} | |")


def langgraph_rows(gw: GatewayServer, store: SpanStore, tracing: Any, args: argparse.Namespace
                   ) -> dict[str, dict[str, float]]:
    """The LangGraph example agent instrumented, then bare (its adapter out, then back in)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import math_agent_langgraph  # instruments LangGraph on import, as a user's app does

    rows = {"langgraph": measure(math_agent_langgraph.solve, gw, store, tracing, args, "langgraph")}
    tracerl.uninstrument("langgraph")
    try:
        rows["langgraph-bare"] = measure(math_agent_langgraph.solve, gw, store, tracing, args, "langgraph-bare")
    finally:
        tracerl.instrument("langgraph")
    return rows


if __name__ == "__main__":
    main()
