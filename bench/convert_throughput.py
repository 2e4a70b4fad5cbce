"""Converter throughput: spans -> Episode on one core, with realistic gateway spans.

Each synthetic episode is what a rollout through the gateway leaves in the store: an
episode root span (``tracerl.episode``: session, task id, task JSON), ``--calls`` gateway LLM
spans (children of the root, as when the agent's client propagates traceparent) and one
reward span. The gateway spans carry what :func:`tracerl.gateway.recording.gateway_span`
writes: GenAI JSON input/output messages, prompt and response token ids, logprobs, usage,
response id, finish reason, tool definitions, the per-session sequence number and weight
version. Prompts grow call by call, token for token (prompt k+1 = prompt k + response k +
the tool result and template glue), from about 100 to about 600 tokens over 8 calls.

All spans are built in memory first, then ``episode_from_spans`` runs over every episode in
this process (one core) and the wall time is reported. The input is moved out of the
garbage collector's view (``gc.freeze()``) so the figure is the converter's own cost, not
the cost of holding the input alive; ``--no-freeze`` keeps it in view. The converted
episodes are all kept, as ``episodes_from_store`` keeps them, so the collector re-traverses
them as they accumulate; the time it spends is reported, and ``--discard`` drops each episode
once converted (a streaming consumer).

    python bench/convert_throughput.py                     # 10,000 episodes x 8 calls
    python bench/convert_throughput.py --episodes 1000 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import sys
import time
from typing import Any

from tracerl.core import semconv as sc
from tracerl.core.convert import episode_from_spans, episodes_from_sessions
from tracerl.core.spans import SpanRecord
from tracerl.core.types import Message, TerminationReason, ToolCall

VOCAB = list(range(151_000))  # a Qwen-sized vocabulary; ids are shared int objects
WORDS = ("the", "of", "result", "tool", "answer", "number", "compute", "value", "is", "we", "then",
         "search", "first", "step", "check", "sum", "total", "next", "call", "returns")
TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name} tool",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
         for name in ("calculator", "search")]
TOOLS_JSON = json.dumps(TOOLS, separators=(",", ":"))
AGENT_RESOURCE = {"service.name": "math-agent", "telemetry.sdk.language": "python",
                  "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.version": "1.45.2"}
GATEWAY_RESOURCE = {"service.name": "tracerl-gateway"}
SAMPLING = json.dumps({"temperature": 1.0, "top_p": 1.0}, separators=(",", ":"))


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choices(WORDS, k=n_words))


def _hex(rng: random.Random, bits: int) -> str:
    return format(rng.getrandbits(bits) | 1, f"0{bits // 4}x")


def _gateway_attrs(rng: random.Random, session: str, seq: int, messages: list[Message], out: Message,
                   prompt: list[int], response: list[int], finish: str) -> dict[str, Any]:
    return {
        sc.SPAN_TYPE: "llm",
        sc.SOURCE: "gateway",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "tracerl",
        "gen_ai.request.model": "policy",
        "gen_ai.response.model": "Qwen/Qwen2.5-0.5B-Instruct",
        "gen_ai.response.id": f"chatcmpl-{_hex(rng, 96)}",
        "gen_ai.response.finish_reasons": [finish],
        "gen_ai.request.stream": False,
        "gen_ai.input.messages": sc.genai_message_json(messages),
        "gen_ai.output.messages": sc.genai_message_json([out]),
        sc.SEQUENCE: seq,
        sc.LATENCY_S: rng.uniform(0.05, 0.8),
        "tracerl.llm.sampling": SAMPLING,
        "gen_ai.usage.input_tokens": len(prompt),
        "gen_ai.usage.output_tokens": len(response),
        sc.PROMPT_IDS: prompt,
        sc.RESPONSE_IDS: response,
        sc.WEIGHT_VERSION: 3,
        sc.RESPONSE_LOGPROBS: [-3.0 * rng.random() ** 3 for _ in response],
        "gen_ai.request.max_tokens": 512,
        "gen_ai.tool.definitions": TOOLS_JSON,
        sc.SESSION_ID: session,
    }


def make_episode(rng: random.Random, index: int, calls: int) -> list[SpanRecord]:
    """The spans one episode of ``calls`` LLM calls leaves behind (root, gateway calls, reward)."""
    session, trace_id, root_id = f"ep-{index:06d}", _hex(rng, 128), _hex(rng, 64)
    t = 1_700_000_000_000_000_000 + index * 60_000_000_000
    question = f"What is {rng.randint(10, 999)} * {rng.randint(10, 999)}? " + _text(rng, 40)
    messages = [Message(role="system", content="You are a careful math agent. " + _text(rng, 30)),
                Message(role="user", content=question)]
    prompt = rng.choices(VOCAB, k=rng.randint(90, 110))
    spans: list[SpanRecord] = []
    for seq in range(calls):
        last = seq == calls - 1
        response = rng.choices(VOCAB, k=rng.randint(30, 60))
        if last:
            out = Message(role="assistant", content="The answer is 42. " + _text(rng, 12))
        else:
            tool = rng.choice(("calculator", "search"))
            out = Message(role="assistant", content=_text(rng, 8), tool_calls=[
                ToolCall(id=f"call_{index}_{seq}", name=tool, arguments=json.dumps({"q": _text(rng, 4)}))])
        start = t + 1_000_000 + seq * 1_500_000_000
        spans.append(SpanRecord(
            trace_id=trace_id, span_id=_hex(rng, 64), parent_span_id=root_id, name="chat policy",
            kind="SERVER", start_ns=start, end_ns=start + 400_000_000,
            attributes=_gateway_attrs(rng, session, seq, list(messages), out, prompt, response,
                                      "stop" if last else "tool_calls"),
            resource=GATEWAY_RESOURCE, scope="tracerl.gateway",
        ))
        messages.append(out)
        if not last:
            messages.append(Message(role="tool", content=_text(rng, 10), tool_call_id=out.tool_calls[0].id))
            glue = rng.choices(VOCAB, k=rng.randint(15, 30))  # tool result + chat template tokens
            prompt = prompt + response + glue
    end = t + calls * 1_500_000_000 + 10_000_000
    task = {"id": f"task-{index}", "data": {"question": question}, "answer": 42, "dataset": "synthetic"}
    spans.insert(0, SpanRecord(
        trace_id=trace_id, span_id=root_id, parent_span_id=None, name="tracerl.episode", start_ns=t, end_ns=end,
        attributes={sc.SPAN_TYPE: "episode", sc.SESSION_ID: session, sc.TASK_ID: task["id"],
                    sc.TASK_JSON: json.dumps(task)},
        resource=AGENT_RESOURCE, scope="tracerl.core.rollout",
    ))
    spans.append(SpanRecord(
        trace_id=trace_id, span_id=_hex(rng, 64), parent_span_id=root_id, name="tracerl.reward",
        start_ns=end - 5_000_000, end_ns=end - 4_000_000,
        attributes={sc.SPAN_TYPE: "reward", sc.REWARD_VALUE: 1.0, sc.REWARD_NAME: "reward",
                    sc.REWARD_SCOPE: "episode", sc.REWARD_IS_CORRECT: True, sc.SESSION_ID: session},
        resource=AGENT_RESOURCE, scope="tracerl.core.rollout",
    ))
    return spans


def check(episodes: list[Any], calls: int) -> list[str]:
    """The converter understood the synthetic data the way a trainer needs it."""
    problems = []
    for ep in episodes[:: max(1, len(episodes) // 200)]:
        traj = ep.trajectories
        if not (len(traj) == 1 and len(traj[0].steps) == calls and len(traj[0].sequences) == 1
                and traj[0].prefix_breaks == 0 and ep.reward == 1.0
                and ep.termination_reason is TerminationReason.SUCCESS and ep.task is not None):
            problems.append(f"{ep.id}: unexpected episode shape {ep.metrics}")
    return problems


class GCTimer:
    """Time spent in the cyclic garbage collector (cProfile charges it to whoever allocated)."""

    def __init__(self) -> None:
        self.seconds, self.collections, self._t = 0.0, [0, 0, 0], 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t
            self.collections[info["generation"]] += 1


def convert_all(data: list[list[SpanRecord]], *, discard: bool, batch: bool,
                profiler: cProfile.Profile | None) -> tuple[list[Any], float, float, GCTimer]:
    """Convert every episode; return (kept episodes, wall s, CPU s, GC time)."""
    gc_timer = GCTimer()
    gc.callbacks.append(gc_timer)
    keep = max(1, len(data) // 200) if discard else 1  # --discard keeps a sample to check
    episodes = []
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    if batch:  # the library's batch API (what episodes_from_store uses)
        episodes = episodes_from_sessions({spans[0].attributes[sc.SESSION_ID]: spans for spans in data})
    else:
        for i, spans in enumerate(data):
            ep = episode_from_spans(spans, episode_id=spans[0].attributes[sc.SESSION_ID])
            if i % keep == 0:
                episodes.append(ep)
    if profiler is not None:
        profiler.disable()
    # CPU time is the figure for "one core": wall time also counts other processes' turns.
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.callbacks.remove(gc_timer)
    return episodes, wall, cpu, gc_timer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=8, help="LLM calls per episode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="print the top cProfile entries")
    parser.add_argument("--top", type=int, default=25, help="profile entries to print")
    parser.add_argument("--no-freeze", action="store_true", help="leave the input in the GC's view")
    parser.add_argument("--discard", action="store_true",
                        help="drop each Episode after converting it (streaming) instead of keeping all")
    parser.add_argument("--batch", action="store_true",
                        help="convert all episodes with one episodes_from_sessions call (keeps all)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    data = [make_episode(rng, i, args.calls) for i in range(args.episodes)]
    n_spans, n_llm = sum(len(spans) for spans in data), args.episodes * args.calls
    tokens = sum(len(s.attributes.get(sc.PROMPT_IDS, ())) for spans in data for s in spans)
    print(f"generated {args.episodes} episodes, {n_spans} spans ({n_llm} LLM), "
          f"mean prompt {tokens / n_llm:.0f} tokens, in {time.perf_counter() - t0:.1f}s")
    if not args.no_freeze:
        gc.collect()
        gc.freeze()

    profiler = cProfile.Profile() if args.profile else None
    episodes, wall, cpu, gc_time = convert_all(data, discard=args.discard, batch=args.batch, profiler=profiler)
    print(f"converted in {wall:.2f}s wall, {cpu:.2f}s CPU{' (under cProfile)' if profiler else ''}; "
          f"{gc_time.seconds:.2f}s of it in the garbage collector "
          f"(gen0/1/2 collections: {'/'.join(map(str, gc_time.collections))})")
    for label, secs in (("per CPU second", cpu), ("per wall second", wall)):
        print(f"  {label:16} {n_llm / secs:9,.0f} LLM spans/s {n_spans / secs:9,.0f} spans/s "
              f"{args.episodes / secs:7,.0f} episodes/s {secs / args.episodes * 1e6:7,.0f} us/episode")
    problems = check(episodes, args.calls)
    for line in problems[:5]:
        print("CHECK FAILED:", line)
    if profiler is not None:
        stats = pstats.Stats(profiler).strip_dirs()
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
