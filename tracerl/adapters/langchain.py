"""LangChain and LangGraph: a globally registered callback handler.

``instrument()`` registers :class:`TracerlCallbackHandler` through LangChain's own
configure hook (``langchain_core.tracers.context.register_configure_hook``), so every
runnable invoked anywhere in the process reports to it, LangGraph graphs included; nothing is
monkey-patched. Spans written:

* ``chat {model}`` per chat-model call (GenAI attributes: messages, tools, model, usage,
  response id, finish reason; the LangGraph node as ``tracerl.node.name`` and
  ``tracerl.node.step``; ``tracerl.agent.name`` when the run's metadata has
  ``tracerl_agent``), current while the HTTP call is made;
* ``execute_tool {name}`` per tool run;
* ``tracerl.episode`` for each top-level run (a graph or chain invocation, or a chat model
  invoked alone) when no session is open: one run of the app, one episode
  (:mod:`tracerl.core.record`);
* with ``instrument(workflow_spans=True)`` only: ``invoke_workflow {name}`` for each top-level run
  and ``node {name}`` for each LangGraph node run.

Chain spans are off by default because training needs none of them (the chat span already
names its node and step) and they are most of the cost: a LangGraph node call with them is
three spans. Inside a session (every rollout) LangChain then skips the handler for chain
events (``ignore_chain``) and one span remains; outside one, chain events reach it to find
the top-level run, and below it cost one comparison each. See bench/instrument_overhead.py.

Name a role explicitly with ``config={"metadata": {"tracerl_agent": "judge"}}``; otherwise
the converter names trajectories after the LangGraph node that made the call.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from tracerl.core import _json
from tracerl.core import semconv as sc
from tracerl.core.errors import ConfigError
from tracerl.core.messages import genai_doc
from tracerl.core.otel import Tracing
from tracerl.core.record import close_app_episode, inside_session, open_app_episode
from tracerl.core.rollout import Session
from tracerl.core.types import Message

from . import _common
from .base import Instrumentor, Options

SUPPORTED_VERSIONS = "langchain-core >= 1.0, langgraph >= 1.0"
log = logging.getLogger(__name__)

try:
    from langchain_core.callbacks import BaseCallbackHandler
except ImportError as exc:  # pragma: no cover
    from tracerl.core.errors import MissingDependencyError

    raise MissingDependencyError("langchain-core", "langchain", "The LangChain adapter") from exc


@dataclass(slots=True)
class _Run:
    span: trace.Span | None  # None: a run we do not trace, kept for parent lookup
    parent: UUID | None
    token: object | None = None


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool",
          "chat": "user", "developer": "system"}


def _text(content: Any) -> str | None:
    if isinstance(content, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content
                       if isinstance(p, str) or p.get("type") == "text") or None
    return content


def _genai_doc(m: Any) -> dict[str, Any]:
    """A LangChain BaseMessage as one GenAI message document: what ``genai_message_json``
    writes for the same message as our Message (tested equal)."""
    content = _text(m.content)
    call_id, name = getattr(m, "tool_call_id", None), getattr(m, "name", None)
    doc = genai_doc(_ROLES.get(getattr(m, "type", "human"), "user"), content if isinstance(content, str) else None,
                    (), name=None if name is None else str(name),
                    tool_call_id=None if call_id is None else str(call_id))
    # LangChain keeps tool-call arguments parsed: written as they are, not through text
    doc["parts"].extend({"type": "tool_call", "id": None if tc.get("id") is None else str(tc["id"]),
                         "name": str(tc.get("name", "")), "arguments": tc.get("args", {})}
                        for tc in getattr(m, "tool_calls", None) or ())
    return doc


def messages_json(messages: Any) -> str:
    """LangChain messages as a GenAI ``gen_ai.*.messages`` JSON string."""
    return _json.dumps([_genai_doc(m) for m in messages])


class TracerlCallbackHandler(BaseCallbackHandler):
    """Turns LangChain runs into OTel GenAI spans. Never raises into LangChain."""

    run_inline = True  # run in the caller's task/thread, so our span is current for the HTTP call
    raise_error = False

    def __init__(self, tracer: trace.Tracer, *, workflow_spans: bool = False, capture_content: bool = True,
                 tracing: Tracing | None = None):
        self._tracer = tracer
        self._workflow_spans = workflow_spans
        self._content = capture_content
        self._tracing = tracing  # where a top-level run opens its episode (None: it opens none)
        # run id -> what we made of it; every access is one dict operation, atomic, so no
        # lock (LangChain calls us from many threads and tasks, on every run)
        self._runs: dict[UUID, _Run] = {}
        self._episodes: dict[UUID, Session] = {}  # top-level run id -> the episode it opened

    # LangChain asks these before dispatching an event to a handler: events we ignore cost
    # it one attribute read instead of a call.
    @property
    def ignore_chain(self) -> bool:
        # Inside a session (every rollout) chain events matter only for workflow spans; outside
        # one, the top-level run opens the episode.
        return not self._workflow_spans and inside_session()

    @property
    def ignore_retriever(self) -> bool:
        return True

    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    # -- bookkeeping ------------------------------------------------------------------

    def _parent_span(self, parent_run_id: UUID | None) -> trace.Span | None:
        run_id = parent_run_id
        while run_id is not None:
            run = self._runs.get(run_id)
            if run is None:
                return None
            if run.span is not None:
                return run.span
            run_id = run.parent
        return None

    def _start(self, run_id: UUID, parent_run_id: UUID | None, name: str | None, kind: SpanKind,
               attrs: dict[str, Any], *, current: bool = False) -> None:
        if name is None:  # an internal runnable: remember its parent for lookups, nothing else
            self._runs[run_id] = _Run(None, parent_run_id)
            return
        parent = self._parent_span(parent_run_id)
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        span = self._tracer.start_span(name, context=ctx, kind=kind, attributes=attrs)
        token = None
        if current:
            token = otel_context.attach(trace.set_span_in_context(span))
        self._runs[run_id] = _Run(span, parent_run_id, token)

    def _end(self, run_id: UUID, build: Any = None, *args: Any, error: BaseException | None = None) -> None:
        """End the run's span, with the attributes ``build(*args)`` gives if ``build``."""
        run = self._runs.pop(run_id, None)
        if run is None:
            return
        if run.token is not None:  # (the API's detach never raises: it logs what fails)
            otel_context.detach(run.token)  # type: ignore[arg-type]
        if run.span is None:
            return
        if build is not None:
            _common.set_attributes(run.span, build, *args)
        if error is not None:
            run.span.record_exception(error)
            run.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:200]))
            run.span.set_attribute("error.type", type(error).__name__)
        run.span.end()

    # -- the episode of a top-level run ------------------------------------------------

    def _open_episode(self, run_id: UUID, name: str) -> None:
        if self._tracing is not None:
            sess = open_app_episode(self._tracing, "langchain", name)
            if sess is not None:
                self._episodes[run_id] = sess

    def _close_episode(self, run_id: UUID, error: BaseException | None = None) -> None:
        sess = self._episodes.pop(run_id, None)
        if sess is not None:
            close_app_episode(sess, error)

    # -- chains and LangGraph nodes ---------------------------------------------------

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                       **kwargs: Any) -> None:
        metadata = metadata or {}
        name = kwargs.get("name") or (serialized or {}).get("name") or "chain"
        if parent_run_id is None:
            self._open_episode(run_id, name)  # first: the workflow span is its child
            if self._workflow_spans:
                self._start(run_id, None, f"invoke_workflow {name}", SpanKind.INTERNAL,
                            {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": name})
        elif not self._workflow_spans:
            return
        elif metadata.get("langgraph_node") == name and parent_run_id in self._runs:
            attrs = {sc.NODE_NAME: name, "langgraph.step": int(metadata.get("langgraph_step", 0))}
            if metadata.get("tracerl_agent"):
                attrs[sc.AGENT_NAME] = str(metadata["tracerl_agent"])
            self._start(run_id, parent_run_id, f"node {name}", SpanKind.INTERNAL, attrs)
        else:
            self._start(run_id, parent_run_id, None, SpanKind.INTERNAL, {})

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id)
        self._close_episode(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error=error)
        self._close_episode(run_id, error)

    # -- chat models ------------------------------------------------------------------

    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[Any]], *, run_id: UUID,
                            parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                            **kwargs: Any) -> None:
        metadata = metadata or {}
        params = kwargs.get("invocation_params") or {}
        model = params.get("model") or params.get("model_name") or metadata.get("ls_model_name") or "unknown"
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": str(metadata.get("ls_provider") or "unknown"),
            "gen_ai.request.model": str(model),
        }
        if self._content:
            attrs["gen_ai.input.messages"] = messages_json(messages[0] if messages else ())
            if params.get("tools"):
                attrs["gen_ai.tool.definitions"] = _json.dumps(params["tools"])
        for key in ("temperature", "top_p", "max_tokens"):
            if isinstance(params.get(key), (int, float)):
                attrs[f"gen_ai.request.{key}"] = params[key]
        if metadata.get("langgraph_node"):
            attrs[sc.NODE_NAME] = str(metadata["langgraph_node"])
            if isinstance(metadata.get("langgraph_step"), int):
                attrs[sc.NODE_STEP] = metadata["langgraph_step"]
        if metadata.get("tracerl_agent"):
            attrs[sc.AGENT_NAME] = str(metadata["tracerl_agent"])
        if parent_run_id is None:  # a chat model invoked alone is a run of its own
            self._open_episode(run_id, f"chat {model}")
        self._start(run_id, parent_run_id, f"chat {model}", SpanKind.CLIENT, attrs, current=True)

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *, run_id: UUID,
                     parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        from langchain_core.messages import HumanMessage

        self.on_chat_model_start(serialized, [[HumanMessage(p) for p in prompts[:1]]], run_id=run_id,
                                 parent_run_id=parent_run_id, **kwargs)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, _result_attributes, response, self._content)
        self._close_episode(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error=error)
        self._close_episode(run_id, error)

    # -- tools ------------------------------------------------------------------------

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if kwargs.get("tool_call_id"):
            attrs["gen_ai.tool.call.id"] = str(kwargs["tool_call_id"])
        if self._content:  # the arguments as JSON, as the model wrote them (input_str is their repr)
            inputs = kwargs.get("inputs")
            attrs["gen_ai.tool.call.arguments"] = _json.dumps(inputs) if isinstance(inputs, dict) else str(input_str)
        self._start(run_id, parent_run_id, f"execute_tool {name}", SpanKind.INTERNAL, attrs)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, _tool_result if self._content else None, output)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error=error)


def _tool_result(output: Any) -> dict[str, Any]:
    # a ToolNode's output is a ToolMessage; a plain tool run's, whatever the tool returned
    result = getattr(output, "content", output)
    return {"gen_ai.tool.call.result": result if isinstance(result, str) else str(result)}


def _result_attributes(response: Any, content: bool) -> dict[str, Any]:
    """GenAI response attributes from an LLMResult (the reply's content only if ``content``)."""
    attrs: dict[str, Any] = {}
    gens = response.generations[0] if getattr(response, "generations", None) else []
    llm_output = getattr(response, "llm_output", None) or {}
    if not gens:
        return attrs
    gen = gens[0]
    message = getattr(gen, "message", None)
    info = getattr(gen, "generation_info", None) or {}
    meta = getattr(message, "response_metadata", None) or {}
    finish = info.get("finish_reason") or meta.get("finish_reason")
    if content:
        attrs["gen_ai.output.messages"] = (messages_json((message,)) if message is not None else
                                           sc.genai_message_json([Message(role="assistant", content=gen.text)]))
    if finish:
        attrs["gen_ai.response.finish_reasons"] = [str(finish)]
    response_id = llm_output.get("id") or meta.get("id")
    if response_id:
        attrs["gen_ai.response.id"] = str(response_id)
    model = llm_output.get("model_name") or meta.get("model_name")
    if model:
        attrs["gen_ai.response.model"] = str(model)
    usage = getattr(message, "usage_metadata", None) or {}
    if usage:
        attrs["gen_ai.usage.input_tokens"] = int(usage.get("input_tokens", 0))
        attrs["gen_ai.usage.output_tokens"] = int(usage.get("output_tokens", 0))
    return attrs


# -- instrument / uninstrument ----------------------------------------------------------


def _configure_hooks() -> list[Any]:
    """LangChain's list of registered configure hooks. LangChain has a public way to add one
    (``register_configure_hook``) and none to remove it, so uninstrument edits this private
    list: the one private name the adapter reads (tests/test_adapter_langchain.py checks it
    on the installed version)."""
    from langchain_core.tracers import context

    hooks = getattr(context, "_configure_hooks", None)
    if not isinstance(hooks, list):
        raise ConfigError("this langchain-core has no langchain_core.tracers.context._configure_hooks list, "
                          f"which tracerl needs to uninstrument; supported: {SUPPORTED_VERSIONS}")
    return hooks


class LangChainInstrumentor(Instrumentor):
    """Reports every LangChain/LangGraph LLM call and tool run in this process as spans (and
    with ``workflow_spans=True`` the graph and node runs), through LangChain's configure hook."""

    name, title, supported_versions, has_workflow_spans = "langchain", "LangChain", SUPPORTED_VERSIONS, True

    def _instrument(self, tracer: trace.Tracer, options: Options) -> None:
        from langchain_core.tracers.context import register_configure_hook

        hooks = _configure_hooks()
        handler = TracerlCallbackHandler(tracer, workflow_spans=options.workflow_spans,
                                         capture_content=options.capture_content, tracing=options.tracing)
        # The variable's default is the handler, so every context (threads, tasks) sees it.
        var: ContextVar[Any] = ContextVar("tracerl_langchain_handler", default=handler)
        register_configure_hook(var, True)
        self._hook = hooks[-1]

    def _uninstrument(self) -> None:
        hooks = _configure_hooks()
        hooks[:] = [h for h in hooks if h is not self._hook]


_instrumentor = LangChainInstrumentor()
instrument = _instrumentor.instrument
uninstrument = _instrumentor.uninstrument


def is_instrumented() -> bool:
    return _instrumentor.is_instrumented
