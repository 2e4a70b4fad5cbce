"""OpenAI Agents SDK: a TracingProcessor that turns the SDK's own trace into OTel spans.

``instrument()`` registers :class:`TracerlTracingProcessor` with the SDK's trace provider and
takes the SDK's default uploader (BatchTraceProcessor -> api.openai.com) out of the chain, so
nothing leaves the machine; ``uninstrument()`` puts the processor list back as it was.
Tracing is switched on while instrumented (an ``OPENAI_AGENTS_DISABLE_TRACING`` set only to
stop uploads would otherwise silence us too).

Spans: ``invoke_agent {agent}`` (``gen_ai.agent.name``; the converter names trajectories
after it), ``chat {model}`` per generation/response (current while the HTTP call is made, so
the gateway's span nests under it), ``execute_tool {name}`` and ``handoff {from} -> {to}``;
and, when no session is open, ``tracerl.episode`` per SDK trace (a ``Runner.run``, or the runs
under one ``agents.trace(...)``): one run of the app, one episode (:mod:`tracerl.core.record`);
with ``instrument(workflow_spans=True)`` also ``invoke_workflow {trace}`` per SDK trace. That one is off by default, as LangChain's graph and node spans are:
training needs none of it, and every span costs CPU on each call.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from tracerl.core import _json
from tracerl.core.errors import ConfigError
from tracerl.core.messages import responses_to_chat
from tracerl.core.otel import Tracing
from tracerl.core.record import close_app_episode, open_app_episode
from tracerl.core.rollout import Session

from . import _common
from .base import Instrumentor, Options

SUPPORTED_VERSIONS = "openai-agents >= 0.20"
log = logging.getLogger(__name__)

try:
    from agents.tracing import TracingProcessor, get_trace_provider
except ImportError as exc:  # pragma: no cover
    from tracerl.core.errors import MissingDependencyError

    raise MissingDependencyError("openai-agents", "openai-agents", "The OpenAI Agents adapter") from exc


class _Mirrored:
    """One SDK span we mirror: our span, the context its children start in (built once,
    shared by all of them) and, for an LLM call, the token of its attachment as current."""

    __slots__ = ("span", "context", "token")

    def __init__(self, span: trace.Span, token: object | None = None):
        self.span, self.context, self.token = span, trace.set_span_in_context(span), token


_MIRRORED = frozenset({"generation", "response", "agent", "function", "handoff"})


class TracerlTracingProcessor(TracingProcessor):
    """Receives the SDK's traces and spans; never raises into the SDK."""

    def __init__(self, tracer: trace.Tracer, *, workflow_spans: bool = False, capture_content: bool = True,
                 tracing: Tracing | None = None):
        self._tracer = tracer
        self._workflow_spans = workflow_spans
        self._content = capture_content
        self._tracing = tracing  # where an SDK trace opens its episode (None: it opens none)
        self._episodes: dict[str, Session] = {}  # SDK trace id -> the episode it opened
        # SDK span (or trace) id -> what we made of it: a mirror, or for a span we do not
        # mirror (task, turn) the id of its parent, to find its children's nearest mirror.
        # Every access is one dict operation, atomic, so no lock (this runs for every span).
        self._spans: dict[str, _Mirrored | str | None] = {}

    def _parent(self, key: str | None) -> Any:
        spans = self._spans
        for _ in range(64):  # walk up through skipped spans to the nearest mirrored one
            if key is None or key not in spans:
                return None
            found = spans[key]
            if isinstance(found, _Mirrored):
                return found.context
            key = found
        return None

    def on_trace_start(self, t: Any) -> None:
        try:  # an SDK trace (Runner.run) outside a session is one episode, made current here
            sess = open_app_episode(self._tracing, "openai-agents", str(t.name)) if self._tracing else None
        except Exception:  # tracing must never break the agent
            log.debug("tracerl: could not open an episode for an Agents SDK trace", exc_info=True)
            sess = None
        if sess is not None:
            self._episodes[t.trace_id] = sess
        if not self._workflow_spans:  # the agent spans then hang under the caller's current span
            return
        span = self._tracer.start_span(f"invoke_workflow {t.name}", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": str(t.name)})
        self._spans[t.trace_id] = _Mirrored(span)

    def on_trace_end(self, t: Any) -> None:
        found = self._spans.pop(t.trace_id, None)
        if isinstance(found, _Mirrored):
            found.span.end()
        sess = self._episodes.pop(t.trace_id, None)
        if sess is not None:
            close_app_episode(sess)

    def on_span_start(self, span: Any) -> None:
        try:
            data = span.span_data
            if data.type not in _MIRRORED:  # task, turn, ...: remembered for their children only
                self._spans[span.span_id] = span.parent_id
                return
            self._start(span, data)
        except Exception:  # tracing must never break the agent
            log.debug("tracerl: could not mirror an Agents SDK span", exc_info=True)

    def _start(self, span: Any, data: Any) -> None:
        kind, current = SpanKind.INTERNAL, False
        if data.type == "generation" or data.type == "response":
            model = getattr(data, "model", None) or "unknown"
            name, kind, current = f"chat {model}", SpanKind.CLIENT, True
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                     "gen_ai.request.model": str(model)}
        elif data.type == "agent":
            name = f"invoke_agent {data.name}"
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": str(data.name)}
        elif data.type == "function":
            name = f"execute_tool {data.name}"
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": str(data.name)}
        else:  # a handoff
            name, attrs = f"handoff {data.from_agent} -> {data.to_agent}", {}
        ctx = self._parent(span.parent_id) or self._parent(span.trace_id)
        mirrored = _Mirrored(self._tracer.start_span(name, context=ctx, kind=kind, attributes=attrs))
        if current:  # the HTTP call is made inside: the gateway's span becomes its child
            mirrored.token = otel_context.attach(mirrored.context)
        self._spans[span.span_id] = mirrored

    def on_span_end(self, span: Any) -> None:
        found = self._spans.pop(span.span_id, None)
        if not isinstance(found, _Mirrored):
            return
        otel_span = found.span
        try:
            if found.token is not None:
                otel_context.detach(found.token)  # type: ignore[arg-type]
            data = span.span_data
            _common.set_attributes(otel_span, _end_attributes, data, self._content)
            if data.type == "handoff":  # the SDK learns where a handoff went only as it ends
                otel_span.update_name(f"handoff {data.from_agent} -> {data.to_agent}")
            elif data.type == "response" and data.response is not None:  # the model, known now
                otel_span.update_name(f"chat {data.response.model}")
            if span.error:
                otel_span.set_status(Status(StatusCode.ERROR, str(span.error.get("message", ""))[:200]))
        except Exception:  # a span ended in another context: nothing to restore; still end it
            log.debug("tracerl: could not finish an Agents SDK span", exc_info=True)
        otel_span.end()

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


def _end_attributes(data: Any, content: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if data.type == "generation":
        if content:
            attrs["gen_ai.input.messages"] = _common.openai_messages_json(data.input, dicts_only=True)
            attrs["gen_ai.output.messages"] = _common.openai_messages_json(data.output, dicts_only=True)
        usage = data.usage or {}
    elif data.type == "response" and data.response is not None:
        resp = data.response  # the Responses API (the SDK's default model): items, not messages
        attrs = {"gen_ai.response.id": str(resp.id), "gen_ai.response.model": str(resp.model),
                 "gen_ai.request.model": str(resp.model)}
        if content:
            attrs["gen_ai.input.messages"] = _common.openai_messages_json(
                responses_to_chat(data.input, getattr(resp, "instructions", None)))
            attrs["gen_ai.output.messages"] = _common.openai_messages_json(responses_to_chat(resp.output))
            if resp.tools:  # the Response repeats the tools offered (flat GenAI shape already)
                attrs["gen_ai.tool.definitions"] = _json.dumps([t.model_dump(exclude_none=True) for t in resp.tools])
        usage = {"input_tokens": getattr(resp.usage, "input_tokens", None),
                 "output_tokens": getattr(resp.usage, "output_tokens", None)} if resp.usage else {}
    elif data.type == "function":
        if not content:
            return {}
        return {"gen_ai.tool.call.arguments": str(data.input or ""), "gen_ai.tool.call.result": str(data.output or "")}
    else:
        return {}
    for key in ("input_tokens", "output_tokens"):
        if isinstance(usage.get(key), int):
            attrs[f"gen_ai.usage.{key}"] = usage[key]
    return attrs


# -- the SDK's private names: the only ones the adapter reads, checked on the installed
# version by tests/test_adapter_openai_agents.py. The SDK can set its processors
# (set_trace_processors) and switch tracing (set_tracing_disabled) but not say what they were,
# which uninstrument must restore.


def _processors(provider: Any) -> tuple[Any, ...]:
    """The SDK's trace processors now (``DefaultTraceProvider._multi_processor._processors``)."""
    processors = getattr(getattr(provider, "_multi_processor", None), "_processors", None)
    if not isinstance(processors, tuple):
        raise ConfigError("this openai-agents has no DefaultTraceProvider._multi_processor._processors, which "
                          f"tracerl reads to restore the SDK on uninstrument; supported: {SUPPORTED_VERSIONS}")
    return processors


def _disabled_flag(provider: Any) -> Any:
    """The SDK's own tracing switch as set by ``set_disabled`` (None: not set)."""
    return getattr(provider, "_manual_disabled", None)


def _restore_disabled_flag(provider: Any, flag: Any) -> None:
    if hasattr(provider, "_refresh_disabled_flag"):  # DefaultTraceProvider: restore the exact flag
        provider._manual_disabled = flag
        provider._refresh_disabled_flag()
    elif flag is not None:
        provider.set_disabled(flag)


def _uploads(processor: Any) -> bool:
    """Whether ``processor`` is the SDK's uploader to OpenAI (its default processor)."""
    from agents.tracing.processors import default_processor

    return processor is default_processor()


class OpenAIAgentsInstrumentor(Instrumentor):
    """Traces every Agents SDK run in this process into tracerl; nothing is uploaded.
    ``workflow_spans=True`` adds a span per SDK trace (``Runner.run``) above the agent spans."""

    name, title, supported_versions, has_workflow_spans = ("openai-agents", "the OpenAI Agents SDK",
                                                           SUPPORTED_VERSIONS, True)

    def _instrument(self, tracer: trace.Tracer, options: Options) -> None:
        provider = get_trace_provider()
        self._before = _processors(provider)
        self._flag = _disabled_flag(provider)
        ours = TracerlTracingProcessor(tracer, workflow_spans=options.workflow_spans,
                                       capture_content=options.capture_content, tracing=options.tracing)
        provider.set_processors([p for p in self._before if not _uploads(p)] + [ours])
        provider.set_disabled(False)

    def _uninstrument(self) -> None:
        provider = get_trace_provider()
        provider.set_processors(list(self._before))
        _restore_disabled_flag(provider, self._flag)


_instrumentor = OpenAIAgentsInstrumentor()
instrument = _instrumentor.instrument
uninstrument = _instrumentor.uninstrument


def is_instrumented() -> bool:
    return _instrumentor.is_instrumented


__all__ = ["OpenAIAgentsInstrumentor", "TracerlTracingProcessor", "instrument", "is_instrumented", "uninstrument"]
