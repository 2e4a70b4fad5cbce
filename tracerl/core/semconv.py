"""Span dialects: recognise LLM-call, agent, tool and reward spans and read them.

Dialects in, one dialect out (ARCHITECTURE.md). We read:

* our own ``tracerl.*`` attributes (token ids, logprobs, session, sequence number, weight
  version, rewards; defined below), written by the gateway and the adapters;
* the OTel GenAI semantic conventions: ``gen_ai.operation.name``, JSON
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` with typed parts,
  ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, ``gen_ai.usage.*``,
  ``gen_ai.response.*``, and the older flattened ``gen_ai.prompt.N.*`` /
  ``gen_ai.completion.N.*`` form (OpenLLMetry, LiteLLM), ``llm.request.functions.N.*``;
  LiteLLM's otel callback mixes both (JSON ``parts`` plus OpenAI ``tool_calls``, output
  tool calls only as ``gen_ai.completion.N.function_call.*``);
* OpenInference: ``openinference.span.kind``, ``llm.input_messages.N.message.*``,
  ``llm.output_messages.N.message.*``, ``llm.token_count.*``, ``llm.model_name``, and
  ``output.value`` / ``input.value`` for what the flattened messages leave out.

Each field is read from whichever form the span has; the ``tracerl.*`` token attributes
can ride on a span of any dialect. Out come OpenAI-shaped messages, tool definitions
(``{"type": "function", "function": {...}}``) and finish reasons (``tool_calls``).
GenAI JSON messages themselves are read (and written) by :mod:`.messages`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# genai_message_json is re-exported: the gateway, the adapters and the rollout API write with it.
from .messages import MessageCache, genai_messages, openai_content, openai_tool_call
from .messages import genai_message as _genai_message
from .messages import genai_message_json as genai_message_json
from .messages import loads as _loads
from .messages import text as _text
from .spans import SpanRecord
from .types import Message, ToolCall

# --- our attributes ---------------------------------------------------------------------

SESSION_ID = "tracerl.session.id"
RUN_ID = "tracerl.run.id"  # the training run (or evaluation) an episode belongs to: a shared store holds many
SPAN_TYPE = "tracerl.span.type"  # "llm" | "reward" | "episode" | "grading" | "task"
SOURCE = "tracerl.source"  # "gateway" on the gateway's span
GATEWAY_SERVICE = "tracerl-gateway"  # the service.name of the gateway's spans' resource
SEQUENCE = "tracerl.llm.sequence"
PROMPT_IDS = "tracerl.llm.prompt_token_ids"
RESPONSE_IDS = "tracerl.llm.response_token_ids"
RESPONSE_LOGPROBS = "tracerl.llm.response_logprobs"
WEIGHT_VERSION = "tracerl.llm.weight_version"
TOKENIZER = "tracerl.llm.tokenizer"  # fingerprint of the tokenizer (and chat template) that made the ids
LATENCY_S = "tracerl.llm.latency_s"
AGENT_NAME = "tracerl.agent.name"
NODE_NAME = "tracerl.node.name"
NODE_STEP = "tracerl.node.step"  # the LangGraph superstep of the node run that made the call
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
EPISODE_ARTIFACTS = "tracerl.episode.artifacts"  # JSON of what the agent returned
EPISODE_KIND = "tracerl.episode.kind"  # "train" | "eval", set by the trainer and tracerl eval
EPISODE_SOURCE = "tracerl.episode.source"  # the framework whose top-level run opened the episode (no session)
EPISODE_NAME = "tracerl.episode.name"  # that run's name (the graph, the SDK trace)
BAGGAGE_SESSION_KEY = "tracerl.session_id"
BAGGAGE_RUN_KEY = "tracerl.run_id"

# --- conventions we read ----------------------------------------------------------------

GENAI_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
LEGACY_REQUEST_TYPES = frozenset({"chat", "completion", "acompletion"})
GENAI_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
# Finish reasons in OpenAI's words (Step is OpenAI-shaped); GenAI semconv says "tool_call".
FINISH_REASONS = {"tool_call": "tool_calls", "function_call": "tool_calls"}


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
    tokenizer: str | None = None
    latency_s: float | None = None
    agent: str | None = None
    node: str | None = None
    node_step: int | None = None
    dialect: str = "unknown"

    @property
    def is_gateway(self) -> bool:
        """Token truth: the span recorded the exact ids (only the gateway does)."""
        return self.response_ids is not None or self.span.attributes.get(SOURCE) == "gateway"


def read_llm_call(span: SpanRecord, cache: MessageCache | None = None) -> LLMCall:
    """Read an LLM-call span (check :func:`is_llm_span` first). Never raises on bad values."""
    a = span.attributes
    call = LLMCall(span=span)
    _read_tracerl(a, call)
    try:  # noqa: SIM105 - contextlib.suppress costs a context manager per span on the hot path
        _read_messages(a, call, cache)
    except (ValueError, TypeError, AttributeError):  # malformed: keep what was read
        pass
    if a.get(SPAN_TYPE) == "llm":
        call.dialect = "tracerl"
    _read_genai_common(a, call, cache)
    call.finish_reason = FINISH_REASONS.get(call.finish_reason or "", call.finish_reason)
    return call


# --- readers ----------------------------------------------------------------------------


def _read_messages(a: dict[str, Any], call: LLMCall, cache: MessageCache | None) -> None:
    """Messages, tools and usage from whichever dialect the span is written in."""
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        call.dialect = "genai"
        _read_genai_json(a, call, cache)
    elif "llm.input_messages.0.message.role" in a or "openinference.span.kind" in a:
        call.dialect = "openinference"
        _read_openinference(a, call)
    elif any(k.startswith(("gen_ai.prompt.0.", "gen_ai.completion.0.")) for k in a):
        call.dialect = "genai_flat"
        _read_genai_flat(a, call)
    else:
        call.dialect = "genai" if "gen_ai.operation.name" in a else call.dialect


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list):
        if value and type(value[0]) is int and type(value[-1]) is int:
            return value  # already ints (SDK, OTLP and JSON all give ints): no copy
        try:
            return [int(x) for x in value]
        except (TypeError, ValueError):
            return None
    if isinstance(value, str) and value.startswith("["):
        return _int_list(_loads(value))
    return None


def _float_list(value: Any) -> list[float] | None:
    if isinstance(value, list):
        if value and type(value[0]) is float and type(value[-1]) is float:
            return value
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


def _read_tracerl(a: dict[str, Any], call: LLMCall) -> None:
    get = a.get
    call.prompt_ids = _int_list(get(PROMPT_IDS))
    call.response_ids = _int_list(get(RESPONSE_IDS))
    call.response_logprobs = _float_list(get(RESPONSE_LOGPROBS))
    seq, version = get(SEQUENCE), get(WEIGHT_VERSION)
    call.sequence = seq if type(seq) is int else _opt_int(seq)
    call.weight_version = version if type(version) is int else _opt_int(version)
    fingerprint = get(TOKENIZER)
    call.tokenizer = fingerprint if isinstance(fingerprint, str) else None
    latency = get(LATENCY_S)
    call.latency_s = float(latency) if isinstance(latency, (int, float)) else None
    call.agent = get(AGENT_NAME) or None
    call.node = get(NODE_NAME) or None
    step = get(NODE_STEP)
    call.node_step = step if type(step) is int else _opt_int(step)


def _read_genai_common(a: dict[str, Any], call: LLMCall, cache: MessageCache | None = None) -> None:
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
        raw = a.get("gen_ai.tool.definitions")
        if cache is not None and isinstance(raw, str):
            call.tools = cache.tools(raw, _tool_definitions)
            return
        tools = _loads(raw)
        if not isinstance(tools, list):  # LiteLLM's otel callback, older OpenLLMetry
            tools = _indexed(unflatten(a, "llm.request.functions.")) if "llm.request.type" in a else []
        call.tools = _tool_definitions(tools)


def _tool_definitions(tools: Any) -> list[dict[str, Any]]:
    return [d for d in map(tool_definition, tools) if d is not None] if isinstance(tools, list) else []


def tool_definition(t: Any) -> dict[str, Any] | None:
    """A tool definition in OpenAI chat shape ``{"type": "function", "function": {...}}``.

    GenAI ``gen_ai.tool.definitions`` and ``llm.request.functions.N.*`` are flat
    (``{"type": "function", "name": ..., "parameters": ...}``); OpenInference's json_schema
    is already nested. Parameters written as a JSON string are parsed.
    """
    t = _loads(t)
    if not isinstance(t, dict):
        return None
    if isinstance(t.get("function"), dict):
        return t
    if not t.get("name"):
        return t  # not a function tool (a server tool, say): keep it as written
    fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if t.get(k) is not None}
    if isinstance(fn.get("parameters"), str):
        fn["parameters"] = _loads(fn["parameters"]) or fn["parameters"]
    return {"type": t.get("type") or "function", "function": fn}


def _read_genai_json(a: dict[str, Any], call: LLMCall, cache: MessageCache | None = None) -> None:
    messages: list[Message] = []
    system = a.get("gen_ai.system_instructions")
    if system is not None:
        _read_system_instructions(system, messages)
    raw_in = a.get("gen_ai.input.messages")
    if isinstance(raw_in, str) and cache is not None:
        history = cache.parse(raw_in) or []
        if messages:
            messages.extend(history)
        else:
            messages = history  # a fresh list already
    else:
        raw_in = _loads(raw_in)
        if isinstance(raw_in, list):
            messages.extend(genai_messages(raw_in))
    call.input_messages = messages
    text_out = a.get("gen_ai.output.messages")
    raw_out = _loads(text_out)
    if isinstance(raw_out, list) and raw_out:
        first = raw_out[0]
        call.output_message = _genai_message(first)
        if isinstance(first, dict) and first.get("finish_reason"):
            call.finish_reason = str(first["finish_reason"])
    out = call.output_message
    if out is not None and not out.tool_calls and ("llm.request.type" in a or "gen_ai.completion.0.role" in a):
        # LiteLLM's otel callback leaves the output parts empty and writes the calls the
        # legacy way, one ``gen_ai.completion.{i}.function_call`` per call.
        out.tool_calls = _legacy_completion_tool_calls(a)
    elif out is not None and cache is not None and len(raw_out) == 1 and isinstance(text_out, str):
        cache.output(text_out, out)  # the next call's history repeats it: read it once


def _read_system_instructions(system: Any, messages: list[Message]) -> None:
    parts = _loads(system)
    if isinstance(parts, dict):
        parts = [parts]
    if isinstance(parts, list) and parts:
        text = "".join(str(p.get("content", p.get("text", ""))) for p in parts if isinstance(p, dict))
        messages.append(Message(role="system", content=text))
    elif isinstance(system, str) and system and parts is None:  # plain text, not JSON
        messages.append(Message(role="system", content=system))


def _legacy_completion_tool_calls(a: dict[str, Any]) -> list[ToolCall]:
    """Tool calls in ``gen_ai.completion.{i}.tool_calls.{j}.*`` / ``….function_call.*``."""
    calls: list[ToolCall] = []
    for node in _indexed(unflatten(a, "gen_ai.completion.")):
        if isinstance(node, dict):
            calls += _flat_tool_calls(node)
    return calls


def _flat_tool_calls(node: dict[str, Any]) -> list[ToolCall]:
    """The calls of one flattened message: ``tool_calls.{j}.{id,name,arguments}`` (the name
    and arguments also as ``function.*``) or an old single ``function_call.{name,arguments}``."""
    raw = [tc for tc in _indexed(node.get("tool_calls")) if isinstance(tc, dict)]
    if isinstance(node.get("function_call"), dict):
        raw.append(node["function_call"])
    return [c for c in map(openai_tool_call, raw) if c is not None]


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
    content, reasoning = m.get("content"), None
    if content is None and "contents" in m:
        content, reasoning = _oi_contents(m["contents"])
    calls = []
    for tc in _indexed(m.get("tool_calls")):
        t = tc.get("tool_call") if isinstance(tc, dict) else None
        if isinstance(t, dict):
            fn = t["function"] if isinstance(t.get("function"), dict) else {}
            calls.append(ToolCall(id=t.get("id"), name=str(fn.get("name", "")), arguments=_text(fn.get("arguments")) or "{}"))
    return Message(
        role=str(m.get("role") or "user"),
        content=_text(content),
        name=m.get("name"),
        tool_calls=calls,
        tool_call_id=m.get("tool_call_id"),
        reasoning=reasoning,
    )


def _oi_contents(node: Any) -> tuple[str | None, str | None]:
    """``(text, reasoning)`` of ``message.contents.{k}.message_content.{type,text}``."""
    texts: list[str] = []
    reasoning: list[str] = []
    for c in _indexed(node):
        mc = c.get("message_content") if isinstance(c, dict) else None
        if not isinstance(mc, dict):
            continue
        kind = mc.get("type", "text")
        if kind == "text":
            texts.append(str(mc.get("text", "")))
        elif kind == "reasoning":
            reasoning.append(str(mc.get("text", "")))
    return "".join(texts) or None, "".join(reasoning) or None


def _read_openinference(a: dict[str, Any], call: LLMCall) -> None:
    msgs = _indexed(unflatten(a, "llm.input_messages."))
    call.input_messages = [m for m in map(_oi_message, msgs) if m is not None]
    _fill_tool_call_ids(a, call.input_messages)
    outs = [m for m in map(_oi_message, _indexed(unflatten(a, "llm.output_messages."))) if m is not None]
    call.output_message = outs[0] if outs else None
    call.model = a.get("llm.response.model_name") or a.get("llm.model_name") or a.get("llm.request.model_name")
    call.input_tokens = _opt_int(a.get("llm.token_count.prompt"))
    call.output_tokens = _opt_int(a.get("llm.token_count.completion"))
    if a.get("llm.finish_reason"):
        call.finish_reason = str(a["llm.finish_reason"])
    tools = (t.get("tool", {}).get("json_schema") if isinstance(t, dict) else None
             for t in _indexed(unflatten(a, "llm.tools.")))
    call.tools = [d for d in map(tool_definition, tools) if d is not None]
    _read_openinference_metadata(a, call)


def _fill_tool_call_ids(a: dict[str, Any], messages: list[Message]) -> None:
    """Tool results without ``tool_call_id`` get it from the raw request in ``input.value``.

    OpenInference's LiteLLM instrumentor drops the id from ``llm.input_messages``; the
    OpenAI-shaped messages it also writes (``{"messages": [...]}``) still have it.
    """
    if not any(m.role == "tool" and m.tool_call_id is None for m in messages):
        return
    raw = a.get("input.value")
    doc = _loads(raw) if isinstance(raw, str) and len(raw) < 1_000_000 else None
    if isinstance(doc, dict):
        doc = doc.get("messages")
    if not isinstance(doc, list) or len(doc) != len(messages):
        return
    for m, r in zip(messages, doc):
        if m.role == "tool" and m.tool_call_id is None and isinstance(r, dict) and r.get("role") == "tool":
            tid = r.get("tool_call_id")
            m.tool_call_id = str(tid) if tid is not None else None


def _read_openinference_metadata(a: dict[str, Any], call: LLMCall) -> None:
    meta = _loads(a.get("metadata"))
    if isinstance(meta, dict):
        call.node = call.node or meta.get("langgraph_node")
        call.node_step = _opt_int(meta.get("langgraph_step"))
        call.agent = call.agent or meta.get("tracerl_agent")
    # output.value holds the whole response: a ChatCompletion/Response (LiteLLM, Agents
    # SDK with the Responses API) or LangChain's LLMResult (id in llm_output, or in the
    # message's response_metadata when llm_output is null).
    out = a.get("output.value")
    if call.response_id is None and isinstance(out, str) and out.startswith("{") and len(out) < 1_000_000:
        doc = _loads(out)
        if isinstance(doc, dict):
            rid = doc.get("id") or _dig(doc, "llm_output", "id")
            rid = rid or _dig(doc, "generations", 0, 0, "message", "kwargs", "response_metadata", "id")
            call.response_id = rid if isinstance(rid, str) else None


def _dig(doc: Any, *path: str | int) -> Any:
    for key in path:
        if isinstance(key, int):
            doc = doc[key] if isinstance(doc, list) and len(doc) > key else None
        else:
            doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _flat_message(node: Any) -> Message | None:
    """One ``gen_ai.prompt.{i}`` / ``gen_ai.completion.{i}`` node of the legacy flat form."""
    if not isinstance(node, dict):
        return None
    content = node.get("content")
    if isinstance(content, str) and content.startswith("[{"):  # multi-part content as JSON
        parts = _loads(content)
        content = openai_content(parts) if isinstance(parts, list) else content
    calls = _flat_tool_calls(node)
    return Message(
        role=str(node.get("role") or "user"),
        content=None if calls and content == "" else _text(content),
        name=node.get("name"),
        tool_calls=calls,
        tool_call_id=node.get("tool_call_id"),
    )


def _read_genai_flat(a: dict[str, Any], call: LLMCall) -> None:
    call.input_messages = [m for m in map(_flat_message, _indexed(unflatten(a, "gen_ai.prompt."))) if m]
    outs = _indexed(unflatten(a, "gen_ai.completion."))
    if outs:
        call.output_message = _flat_message(outs[0])
        if isinstance(outs[0], dict) and outs[0].get("finish_reason"):
            call.finish_reason = str(outs[0]["finish_reason"])
    call.output_tokens = _opt_int(a.get("gen_ai.usage.completion_tokens"))
    call.input_tokens = _opt_int(a.get("gen_ai.usage.prompt_tokens"))
