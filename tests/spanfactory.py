"""Hand-made spans for converter tests: a gateway call and the framework span around it."""

from __future__ import annotations

import itertools
import json
from typing import Any

from tracerl.core import semconv as sc
from tracerl.core.spans import SpanRecord
from tracerl.core.types import Message
from tracerl.testing import IM_END, ByteTokenizer

TOK = ByteTokenizer()
_ids = itertools.count(1)
TRACE = "ab" * 16


def span_id() -> str:
    return format(next(_ids), "016x")


def span(name: str, start: int, end: int, attrs: dict[str, Any] | None = None, *, parent: str | None = None,
         trace: str = TRACE, sid: str | None = None) -> SpanRecord:
    return SpanRecord(trace_id=trace, span_id=sid or span_id(), parent_span_id=parent, name=name,
                      start_ns=start, end_ns=end, attributes=dict(attrs or {}))


def gateway_span(messages: list[dict[str, Any]], reply: str, seq: int, start: int, *, session: str = "ep",
                 parent: str | None = None, response_id: str | None = None, finish: str = "stop",
                 prompt_ids: list[int] | None = None, trace: str = TRACE) -> SpanRecord:
    """A gateway span whose prompt is the byte-ChatML rendering of ``messages``."""
    prompt = TOK.render(messages) if prompt_ids is None else prompt_ids
    response = [*TOK.encode(reply), IM_END]
    inputs = [Message(role=m["role"], content=m.get("content")) for m in messages]
    attrs = {
        sc.SPAN_TYPE: "llm", sc.SOURCE: "gateway", sc.SESSION_ID: session,
        "gen_ai.operation.name": "chat", "gen_ai.response.model": "tiny",
        "gen_ai.input.messages": sc.genai_message_json(inputs),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": reply}],
                                               "finish_reason": finish}]),
        sc.PROMPT_IDS: prompt, sc.RESPONSE_IDS: response,
        sc.RESPONSE_LOGPROBS: [-0.5] * len(response), sc.SEQUENCE: seq, sc.WEIGHT_VERSION: 3,
    }
    if response_id:
        attrs["gen_ai.response.id"] = response_id
    return span(f"chat tiny #{seq}", start, start + 10, attrs, parent=parent, trace=trace)


def framework_llm_span(reply: str, start: int, *, parent: str | None = None, response_id: str | None = None,
                       node: str | None = None, trace: str = TRACE, question: str = "question") -> SpanRecord:
    """An OpenInference LLM span as the LangChain instrumentor writes it (``question``: the user's message)."""
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "tiny",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": question,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": reply,
    }
    meta: dict[str, Any] = {}
    if node:
        meta["langgraph_node"] = node
        meta["langgraph_step"] = 1
    if response_id:
        meta_out = {"id": response_id}
        attrs["output.value"] = json.dumps(meta_out)
    if meta:
        attrs["metadata"] = json.dumps(meta)
    return span("ChatOpenAI", start, start + 100, attrs, parent=parent, trace=trace)


def reward_span(value: float, start: int, *, step: bool = False, name: str = "reward", agent: str | None = None,
                session: str = "ep", parent: str | None = None, trace: str = TRACE) -> SpanRecord:
    attrs: dict[str, Any] = {sc.SPAN_TYPE: "reward", sc.REWARD_VALUE: value, sc.REWARD_NAME: name,
                             sc.REWARD_SCOPE: "step" if step else "episode", sc.SESSION_ID: session}
    if agent:
        attrs[sc.REWARD_AGENT] = agent
    return span("tracerl.reward", start, start, attrs, parent=parent, trace=trace)


def agent_span(name: str, start: int, end: int, *, parent: str | None = None, trace: str = TRACE) -> SpanRecord:
    return span(f"invoke_agent {name}", start, end,
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}, parent=parent, trace=trace)
