"""Span dialects: recognise LLM-call, agent, tool and reward spans and read them.

Dialects in, one dialect out (ARCHITECTURE.md). We read:

* our own ``tracerl.*`` attributes (token ids, logprobs, session, sequence number, weight
  version, rewards; defined below), written by the gateway and the adapters;
* the OTel GenAI semantic conventions: ``gen_ai.operation.name``, JSON
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` with typed parts,
  ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, ``gen_ai.usage.*``,
  ``gen_ai.response.*``, and the older flattened ``gen_ai.prompt.N.*`` /
  ``gen_ai.completion.N.*`` form (OpenLLMetry, LiteLLM);
* OpenInference: ``openinference.span.kind``, ``llm.input_messages.N.message.*``,
  ``llm.output_messages.N.message.*``, ``llm.token_count.*``, ``llm.model_name``.

Each field is read from whichever form the span has; the ``tracerl.*`` token attributes
can ride on a span of any dialect.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .spans import SpanRecord
from .types import Message, ToolCall

# --- our attributes ---------------------------------------------------------------------

SESSION_ID = "tracerl.session.id"
SPAN_TYPE = "tracerl.span.type"  # "llm" | "reward" | "episode"
SOURCE = "tracerl.source"  # "gateway" on the gateway's span
SEQUENCE = "tracerl.llm.sequence"
PROMPT_IDS = "tracerl.llm.prompt_token_ids"
RESPONSE_IDS = "tracerl.llm.response_token_ids"
RESPONSE_LOGPROBS = "tracerl.llm.response_logprobs"
WEIGHT_VERSION = "tracerl.llm.weight_version"
LATENCY_S = "tracerl.llm.latency_s"
AGENT_NAME = "tracerl.agent.name"
NODE_NAME = "tracerl.node.name"
REWARD_VALUE = "tracerl.reward.value"
REWARD_NAME = "tracerl.reward.name"
REWARD_SCOPE = "tracerl.reward.scope"  # "episode" | "step"
REWARD_STEP = "tracerl.reward.step"  # explicit gateway sequence number of the rewarded step
REWARD_AGENT = "tracerl.reward.agent"  # reward meant for one agent's trajectory
REWARD_IS_CORRECT = "tracerl.reward.is_correct"
TASK_ID = "tracerl.task.id"
TASK_JSON = "tracerl.task.json"
TERMINATION_REASON = "tracerl.episode.termination_reason"
EPISODE_ERROR = "tracerl.episode.error"
BAGGAGE_SESSION_KEY = "tracerl.session_id"

# --- conventions we read ----------------------------------------------------------------

GENAI_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
LEGACY_REQUEST_TYPES = frozenset({"chat", "completion", "acompletion"})
GENAI_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})


def is_llm_span(attrs: dict[str, Any]) -> bool:
    if attrs.get(SPAN_TYPE) == "llm":
        return True
    if attrs.get("gen_ai.operation.name") in GENAI_LLM_OPERATIONS:
        return True
    if attrs.get("openinference.span.kind") == "LLM":
        return True
    return attrs.get("llm.request.type") in LEGACY_REQUEST_TYPES


def is_reward_span(attrs: dict[str, Any]) -> bool:
    return attrs.get(SPAN_TYPE) == "reward"


def agent_name_of(span: SpanRecord) -> str | None:
    """The agent name if this span opens an agent (GenAI invoke_agent, OpenInference AGENT)."""
    attrs = span.attributes
    if attrs.get(AGENT_NAME):
        return str(attrs[AGENT_NAME])
    if attrs.get("gen_ai.operation.name") in GENAI_AGENT_OPERATIONS:
        name = attrs.get("gen_ai.agent.name")
        if name:
            return str(name)
        return span.name.split(" ", 1)[1] if " " in span.name else None
    if attrs.get("openinference.span.kind") == "AGENT":
        return str(attrs.get("agent.name") or span.name) or None
    return None


def is_tool_span(attrs: dict[str, Any]) -> bool:
    return attrs.get("gen_ai.operation.name") == "execute_tool" or attrs.get(
        "openinference.span.kind"
    ) == "TOOL"


@dataclass(slots=True)
class LLMCall:
    """What one LLM-call span says about the call, in any dialect."""

    span: SpanRecord
    input_messages: list[Message] = field(default_factory=list)
    output_message: Message | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    response_id: str | None = None
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    response_logprobs: list[float] | None = None
    sequence: int | None = None
    weight_version: int | None = None
    latency_s: float | None = None
    agent: str | None = None
    node: str | None = None
    node_step: int | None = None
    dialect: str = "unknown"

    @property
    def is_gateway(self) -> bool:
        """Token truth: the span recorded the exact ids (only the gateway does)."""
        return self.response_ids is not None or self.span.attributes.get(SOURCE) == "gateway"


def read_llm_call(span: SpanRecord) -> LLMCall:
    """Read an LLM-call span (check :func:`is_llm_span` first). Never raises on bad values."""
    a = span.attributes
    call = LLMCall(span=span)
    _read_tracerl(a, call)
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        call.dialect = "genai"
        _read_genai_json(a, call)
    elif "llm.input_messages.0.message.role" in a or "openinference.span.kind" in a:
        call.dialect = "openinference"
        _read_openinference(a, call)
    elif "gen_ai.prompt.0.role" in a or "gen_ai.completion.0.role" in a or "gen_ai.prompt.0.content" in a:
        call.dialect = "genai_flat"
        _read_genai_flat(a, call)
    else:
        call.dialect = "genai" if "gen_ai.operation.name" in a else call.dialect
    if a.get(SPAN_TYPE) == "llm":
        call.dialect = "tracerl"
    _read_genai_common(a, call)
    return call


# --- readers ----------------------------------------------------------------------------


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list):
        try:
            return [int(x) for x in value]
        except (TypeError, ValueError):
            return None
    if isinstance(value, str) and value.startswith("["):
        return _int_list(_loads(value))
    return None


def _float_list(value: Any) -> list[float] | None:
    if isinstance(value, list):
        try:
            return [float(x) for x in value]
        except (TypeError, ValueError):
            return None
    if isinstance(value, str) and value.startswith("["):
        return _float_list(_loads(value))
    return None


def _opt_int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def _read_tracerl(a: dict[str, Any], call: LLMCall) -> None:
    call.prompt_ids = _int_list(a.get(PROMPT_IDS))
    call.response_ids = _int_list(a.get(RESPONSE_IDS))
    call.response_logprobs = _float_list(a.get(RESPONSE_LOGPROBS))
    call.sequence = _opt_int(a.get(SEQUENCE))
    call.weight_version = _opt_int(a.get(WEIGHT_VERSION))
    latency = a.get(LATENCY_S)
    call.latency_s = float(latency) if isinstance(latency, (int, float)) else None
    call.agent = a.get(AGENT_NAME) or None
    call.node = a.get(NODE_NAME) or None


def _read_genai_common(a: dict[str, Any], call: LLMCall) -> None:
    call.model = call.model or a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
    call.response_id = call.response_id or a.get("gen_ai.response.id")
    reasons = a.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, str):  # LiteLLM writes a JSON string
        reasons = _loads(reasons) if reasons.startswith("[") else [reasons]
    if isinstance(reasons, list) and reasons and call.finish_reason is None:
        call.finish_reason = str(reasons[0])
    if call.input_tokens is None:
        call.input_tokens = _opt_int(a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens")))
    if call.output_tokens is None:
        call.output_tokens = _opt_int(
            a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens"))
        )
    if not call.tools:
        tools = _loads(a.get("gen_ai.tool.definitions"))
        if isinstance(tools, list):
            call.tools = [t for t in tools if isinstance(t, dict)]


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _genai_message(m: Any) -> Message | None:
    """One GenAI JSON message: typed ``parts``, or OpenAI shape (LiteLLM's otel callback)."""
    if not isinstance(m, dict):
        return None
    role = str(m.get("role") or "user")
    parts = m.get("parts")
    if not isinstance(parts, list):
        calls = [_openai_tool_call(tc) for tc in m.get("tool_calls") or ()]
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict)) or None
        return Message(
            role=role,
            content=_text(content),
            name=m.get("name"),
            tool_calls=[c for c in calls if c is not None],
            tool_call_id=m.get("tool_call_id"),
        )
    texts: list[str] = []
    reasoning: list[str] = []
    tool_calls: list[ToolCall] = []
    tool_call_id = None
    for p in parts:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "text":
            texts.append(str(p.get("content", "")))
        elif kind == "reasoning":
            reasoning.append(str(p.get("content", "")))
        elif kind == "tool_call":
            tool_calls.append(
                ToolCall(id=p.get("id"), name=str(p.get("name", "")), arguments=_text(p.get("arguments")) or "{}")
            )
        elif kind == "tool_call_response":
            tool_call_id = p.get("id")
            texts.append(_text(p.get("response", p.get("result"))) or "")
    return Message(
        role=role,
        content="".join(texts) if texts else None,
        name=m.get("name"),
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        reasoning="".join(reasoning) if reasoning else None,
    )


def _openai_tool_call(tc: Any) -> ToolCall | None:
    if not isinstance(tc, dict):
        return None
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
    return ToolCall(id=tc.get("id"), name=str(fn.get("name", "")), arguments=_text(fn.get("arguments")) or "{}")


def _read_genai_json(a: dict[str, Any], call: LLMCall) -> None:
    system = _loads(a.get("gen_ai.system_instructions"))
    messages: list[Message] = []
    if isinstance(system, list) and system:
        text = "".join(str(p.get("content", "")) for p in system if isinstance(p, dict))
        messages.append(Message(role="system", content=text))
    raw_in = _loads(a.get("gen_ai.input.messages"))
    if isinstance(raw_in, list):
        messages.extend(m for m in map(_genai_message, raw_in) if m is not None)
    call.input_messages = messages
    raw_out = _loads(a.get("gen_ai.output.messages"))
    if isinstance(raw_out, list) and raw_out:
        first = raw_out[0]
        call.output_message = _genai_message(first)
        if isinstance(first, dict) and first.get("finish_reason"):
            call.finish_reason = str(first["finish_reason"])


def unflatten(a: dict[str, Any], prefix: str) -> dict[str, Any]:
    """``{prefix+"0.message.role": "user"}`` -> ``{"0": {"message": {"role": "user"}}}``."""
    root: dict[str, Any] = {}
    n = len(prefix)
    for key, value in a.items():
        if not key.startswith(prefix):
            continue
        node = root
        parts = key[n:].split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return root


def _indexed(node: Any) -> list[Any]:
    """Children keyed "0", "1", ... in numeric order."""
    if not isinstance(node, dict):
        return []
    keys = sorted((k for k in node if k.isdigit()), key=int)
    return [node[k] for k in keys]


def _oi_message(node: Any) -> Message | None:
    m = node.get("message") if isinstance(node, dict) else None
    if not isinstance(m, dict):
        return None
    content = m.get("content")
    if content is None and "contents" in m:
        texts = [
            str(c.get("message_content", {}).get("text", ""))
            for c in _indexed(m["contents"])
            if isinstance(c, dict) and c.get("message_content", {}).get("type", "text") == "text"
        ]
        content = "".join(texts) or None
    calls = []
    for tc in _indexed(m.get("tool_calls")):
        t = tc.get("tool_call", {}) if isinstance(tc, dict) else {}
        fn = t.get("function", {}) if isinstance(t.get("function"), dict) else {}
        calls.append(ToolCall(id=t.get("id"), name=str(fn.get("name", "")), arguments=_text(fn.get("arguments")) or "{}"))
    return Message(
        role=str(m.get("role") or "user"),
        content=_text(content),
        name=m.get("name"),
        tool_calls=calls,
        tool_call_id=m.get("tool_call_id"),
    )


def _read_openinference(a: dict[str, Any], call: LLMCall) -> None:
    msgs = _indexed(unflatten(a, "llm.input_messages."))
    call.input_messages = [m for m in map(_oi_message, msgs) if m is not None]
    outs = [m for m in map(_oi_message, _indexed(unflatten(a, "llm.output_messages."))) if m is not None]
    call.output_message = outs[0] if outs else None
    call.model = a.get("llm.response.model_name") or a.get("llm.model_name") or a.get("llm.request.model_name")
    call.input_tokens = _opt_int(a.get("llm.token_count.prompt"))
    call.output_tokens = _opt_int(a.get("llm.token_count.completion"))
    if a.get("llm.finish_reason"):
        call.finish_reason = str(a["llm.finish_reason"])
    tools = []
    for t in _indexed(unflatten(a, "llm.tools.")):
        schema = _loads(t.get("tool", {}).get("json_schema")) if isinstance(t, dict) else None
        if isinstance(schema, dict):
            tools.append(schema)
    call.tools = tools
    _read_openinference_metadata(a, call)


def _read_openinference_metadata(a: dict[str, Any], call: LLMCall) -> None:
    meta = _loads(a.get("metadata"))
    if isinstance(meta, dict):
        call.node = call.node or meta.get("langgraph_node")
        call.node_step = _opt_int(meta.get("langgraph_step"))
        call.agent = call.agent or meta.get("tracerl_agent")
    # The OpenAI Agents instrumentor stores the whole Response/ChatCompletion as output.value.
    out = a.get("output.value")
    if call.response_id is None and isinstance(out, str) and out.startswith("{") and len(out) < 1_000_000:
        doc = _loads(out)
        if isinstance(doc, dict):
            rid = doc.get("id")
            if rid is None and isinstance(doc.get("llm_output"), dict):
                rid = doc["llm_output"].get("id")
            call.response_id = rid if isinstance(rid, str) else None


def _read_genai_flat(a: dict[str, Any], call: LLMCall) -> None:
    def message(node: Any) -> Message | None:
        if not isinstance(node, dict):
            return None
        calls = [
            ToolCall(id=tc.get("id"), name=str(tc.get("name", "")), arguments=_text(tc.get("arguments")) or "{}")
            for tc in _indexed(node.get("tool_calls"))
            if isinstance(tc, dict)
        ]
        return Message(
            role=str(node.get("role") or "user"),
            content=_text(node.get("content")),
            tool_calls=calls,
            tool_call_id=node.get("tool_call_id"),
        )

    call.input_messages = [m for m in map(message, _indexed(unflatten(a, "gen_ai.prompt."))) if m]
    outs = _indexed(unflatten(a, "gen_ai.completion."))
    if outs:
        call.output_message = message(outs[0])
        if isinstance(outs[0], dict) and outs[0].get("finish_reason"):
            call.finish_reason = str(outs[0]["finish_reason"])
    call.output_tokens = _opt_int(a.get("gen_ai.usage.completion_tokens"))
    call.input_tokens = _opt_int(a.get("gen_ai.usage.prompt_tokens"))


# --- writing (used by the gateway, the adapters and the rollout API) -------------------


def genai_message_json(messages: list[Message]) -> str:
    """Our messages as a GenAI ``gen_ai.input.messages`` / ``output.messages`` JSON string."""
    out = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if m.reasoning:
            parts.append({"type": "reasoning", "content": m.reasoning})
        if m.role == "tool":
            parts.append({"type": "tool_call_response", "id": m.tool_call_id, "response": m.content})
        elif m.content is not None:
            parts.append({"type": "text", "content": m.content})
        for tc in m.tool_calls:
            args = _loads(tc.arguments)
            parts.append({"type": "tool_call", "id": tc.id, "name": tc.name, "arguments": args if args is not None else tc.arguments})
        doc: dict[str, Any] = {"role": m.role, "parts": parts}
        if m.name:
            doc["name"] = m.name
        out.append(doc)
    return json.dumps(out, separators=(",", ":"))
