"""The gateway's span: one per generated choice, in the tracerl dialect plus OTel GenAI."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from tracerl.core import semconv as sc
from tracerl.core.ids import time_ordered_trace_id
from tracerl.core.spans import SpanRecord
from tracerl.core.types import Message, ToolCall
from tracerl.engines.base import Generation

# This process's gateway among several writing one store (replicas): each span's resource
# says which one served it (OpenTelemetry's service.instance.id).
INSTANCE_ID = secrets.token_hex(8)


def new_ids() -> tuple[str, str]:
    """A (trace id, span id) pair in W3C hex: the trace id time-ordered, so the store indexes
    it cheaply (tracerl.core.ids), the span id random."""
    return format(time_ordered_trace_id(), "032x"), secrets.token_hex(8)


@dataclass
class CallRecord:
    session: str | None
    trace_id: str
    parent_span_id: str | None
    sequence: int
    request: Any  # ChatRequest | CompletionRequest
    prompt_ids: list[int] | None  # None: a passthrough upstream that returned no ids
    generation: Generation | None
    message: dict[str, Any]
    finish_reason: str
    response_id: str
    model: str
    start_ns: int
    end_ns: int
    stream: bool
    tokenizer: str | None = None  # the fingerprint of the tokenizer that made prompt_ids and the response
    seed: int | None = None  # the call's sampling seed: the request's, else its session's (app.session_seed)


def _messages(req: Any) -> list[Message]:
    msgs = getattr(req, "messages", None)
    if msgs is None:  # /v1/completions: the prompt is one user turn of raw text
        prompt = req.prompt if isinstance(req.prompt, str) else None
        return [Message(role="user", content=prompt)] if prompt is not None else []
    out = []
    for m in msgs:
        calls = [
            ToolCall(id=tc.get("id"), name=str((tc.get("function") or {}).get("name", "")),
                     arguments=(tc.get("function") or {}).get("arguments") or "{}")
            for tc in m.tool_calls or ()
        ]
        out.append(Message(role=m.role, content=m.text(), name=m.name, tool_calls=calls, tool_call_id=m.tool_call_id))
    return out


def gateway_span(call: CallRecord) -> SpanRecord:
    req, gen, msg = call.request, call.generation, call.message
    out = Message(role="assistant", content=msg.get("content"), tool_calls=[
        ToolCall(id=tc["id"], name=tc["function"]["name"], arguments=tc["function"]["arguments"])
        for tc in msg.get("tool_calls") or ()
    ])
    sampling = {k: getattr(req, k) for k in ("temperature", "top_p", "top_k", "seed", "n", "stop") if getattr(req, k, None) is not None}
    if call.seed is not None:  # the seed sampled with, so that a call can be replayed
        sampling["seed"] = call.seed
    attrs: dict[str, Any] = {
        sc.SPAN_TYPE: "llm",
        sc.SOURCE: "gateway",
        "gen_ai.operation.name": "chat" if hasattr(req, "messages") else "text_completion",
        "gen_ai.provider.name": "tracerl",
        "gen_ai.request.model": req.model,
        "gen_ai.response.model": call.model,
        "gen_ai.response.id": call.response_id,
        "gen_ai.response.finish_reasons": [call.finish_reason],
        "gen_ai.request.stream": call.stream,
        "gen_ai.input.messages": sc.genai_message_json(_messages(req)),
        "gen_ai.output.messages": sc.genai_message_json([out]),
        sc.SEQUENCE: call.sequence,
        sc.LATENCY_S: (call.end_ns - call.start_ns) / 1e9,
        "tracerl.llm.sampling": json.dumps(sampling, separators=(",", ":")),
    }
    if call.prompt_ids is not None and gen is not None:
        attrs.update({
            "gen_ai.usage.input_tokens": len(call.prompt_ids),
            "gen_ai.usage.output_tokens": len(gen.token_ids),
            sc.PROMPT_IDS: call.prompt_ids,
            sc.RESPONSE_IDS: gen.token_ids,
            sc.WEIGHT_VERSION: gen.weight_version,
        })
        if call.tokenizer is not None:
            attrs[sc.TOKENIZER] = call.tokenizer
        if gen.logprobs is not None and len(gen.logprobs) == len(gen.token_ids):
            attrs[sc.RESPONSE_LOGPROBS] = gen.logprobs
    if req.requested_max_tokens is not None:
        attrs["gen_ai.request.max_tokens"] = req.requested_max_tokens
    tools = getattr(req, "tools", None)
    if tools:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools, separators=(",", ":"))
    if call.session is not None:
        attrs[sc.SESSION_ID] = call.session
    return SpanRecord(
        trace_id=call.trace_id,
        span_id=new_ids()[1],
        parent_span_id=call.parent_span_id,
        name=f"chat {call.model}",
        kind="SERVER",
        start_ns=call.start_ns,
        end_ns=call.end_ns,
        attributes=attrs,
        resource={"service.name": sc.GATEWAY_SERVICE, "service.instance.id": INSTANCE_ID},
        scope="tracerl.gateway",
    )
