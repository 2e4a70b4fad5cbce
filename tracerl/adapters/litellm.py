"""LiteLLM: a CustomLogger registered in LiteLLM's callback lists (sync, async, streaming).

LiteLLM calls success/failure hooks after the HTTP call, often on a worker thread, so the
span is written then, with the call's real start and end times and, as its parent, the OTel
context captured in ``log_pre_api_call`` (which runs in the caller's context): the span
lands in the caller's trace and session. It records ``gen_ai.response.id``, which is how the
converter joins it to the gateway's token span (LiteLLM's own HTTP call is not nested under
it); with HTTP propagation on, the session also reaches the gateway in W3C baggage.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from tracerl.core import _json
from tracerl.core import semconv as sc
from tracerl.core.messages import responses_to_chat
from tracerl.core.otel import Tracing, register_flush_hook, unregister_flush_hook
from tracerl.core.record import close_app_episode, open_app_episode
from tracerl.core.rollout import Session

from . import _common
from .base import Instrumentor, Options

SUPPORTED_VERSIONS = "litellm >= 1.70"
log = logging.getLogger(__name__)

try:
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as exc:  # pragma: no cover
    from tracerl.core.errors import MissingDependencyError

    raise MissingDependencyError("litellm", "litellm", "The LiteLLM adapter") from exc


def _ns(value: Any) -> int | None:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, (int, float)):
        return int(value * 1e9)
    return None


class TracerlLiteLLMLogger(CustomLogger):
    """One ``chat {model}`` span per LiteLLM completion call."""

    def __init__(self, tracer: trace.Tracer, *, capture_content: bool = True, tracing: Tracing | None = None):
        super().__init__()
        self._tracer = tracer
        self._content = capture_content
        self._tracing = tracing  # where a call outside any run opens its episode (None: it opens none)
        self._contexts: dict[str, Any] = {}  # calls started and not yet reported
        self._episodes: dict[str, Session] = {}  # call id -> the episode it opened
        self._done = threading.Condition()

    def log_pre_api_call(self, model: str, messages: Any, kwargs: dict[str, Any]) -> None:
        call_id = kwargs.get("litellm_call_id")
        if call_id:
            # a call outside any session or framework run is one episode: current from here, so
            # the HTTP call carries it to the gateway; it ends when LiteLLM reports the call
            sess = open_app_episode(self._tracing, "litellm", f"chat {model}") if self._tracing else None
            with self._done:
                self._contexts[call_id] = otel_context.get_current()
                if sess is not None:
                    self._episodes[call_id] = sess

    def flush(self, timeout_s: float) -> None:
        """Wait until every started call has been reported (LiteLLM reports on a worker)."""
        with self._done:  # bounded: a call LiteLLM never reports must not stall every episode
            self._done.wait_for(lambda: not self._contexts, timeout=min(timeout_s, 5.0))
            # Never reported (LiteLLM logs an async call in a task of its loop, cancelled when the
            # loop closes first): end their episodes, which hold the gateway's span all the same.
            abandoned = [self._episodes.pop(call_id) for call_id in list(self._episodes)
                         if self._episodes[call_id].ended_at is None]
        for sess in abandoned:
            close_app_episode(sess)

    def _record(self, kwargs: dict[str, Any], response: Any, start: Any, end: Any, error: Any = None) -> None:
        sess, call_id = None, kwargs.get("litellm_call_id") or ""
        try:
            with self._done:  # still pending (for flush) until its episode has ended too
                ctx = self._contexts.get(call_id)
                sess = self._episodes.pop(call_id, None)
            model = str(kwargs.get("model") or "unknown")
            optional = kwargs.get("optional_params") or {}
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": str((kwargs.get("litellm_params") or {}).get("custom_llm_provider") or "litellm"),
                "gen_ai.request.model": model,
            }
            metadata = (kwargs.get("litellm_params") or {}).get("metadata") or {}
            if isinstance(metadata, dict) and metadata.get("tracerl_agent"):  # a role name, as in LangChain
                attrs[sc.AGENT_NAME] = str(metadata["tracerl_agent"])
            span = self._tracer.start_span(f"chat {model}", context=ctx, kind=SpanKind.CLIENT,
                                           attributes=attrs, start_time=_ns(start))
            _common.set_attributes(span, _call_attributes, kwargs.get("messages") or (), optional.get("tools"),
                                   response if error is None else None, self._content)
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
            span.end(end_time=_ns(end))
        except Exception:  # never break the user's LLM call
            log.debug("tracerl: could not record a LiteLLM call", exc_info=True)
        if sess is not None:
            close_app_episode(sess, error if isinstance(error, BaseException) else None)
        with self._done:
            self._contexts.pop(call_id, None)
            self._done.notify_all()

    def log_success_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._record(kwargs, response_obj, start_time, end_time)

    def log_failure_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._record(kwargs, None, start_time, end_time, error=kwargs.get("exception") or "LiteLLM call failed")

    async def async_log_success_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any,
                                      end_time: Any) -> None:
        self._record(kwargs, response_obj, start_time, end_time)

    async def async_log_failure_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any,
                                      end_time: Any) -> None:
        self._record(kwargs, None, start_time, end_time, error=kwargs.get("exception") or "LiteLLM call failed")


def _call_attributes(messages: Any, tools: Any, response: Any, content: bool) -> dict[str, Any]:
    attrs = {}
    if content:
        attrs["gen_ai.input.messages"] = _common.openai_messages_json(messages)
        if tools:
            attrs["gen_ai.tool.definitions"] = _json.dumps(tools)
    if response is not None:
        attrs.update(_response_attributes(response, content))
    return attrs


def _response_attributes(response: Any, content: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    choices = getattr(response, "choices", None) or []
    if choices:
        choice = choices[0]
        if content:
            attrs["gen_ai.output.messages"] = _common.openai_messages_json([getattr(choice, "message", None) or {}])
        if getattr(choice, "finish_reason", None):
            attrs["gen_ai.response.finish_reasons"] = [str(choice.finish_reason)]
    elif content and isinstance(getattr(response, "output", None), list):  # litellm.responses(): Responses API items
        attrs["gen_ai.output.messages"] = _common.openai_messages_json(responses_to_chat(response.output))
    if getattr(response, "id", None):
        attrs["gen_ai.response.id"] = _provider_response_id(str(response.id))
    if getattr(response, "model", None):
        attrs["gen_ai.response.model"] = str(response.model)
    usage = getattr(response, "usage", None)
    if usage is not None:
        for ours, theirs in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
            value = getattr(usage, theirs, None)
            value = value if isinstance(value, int) else getattr(usage, ours, None)  # Responses usage
            if isinstance(value, int):
                attrs[f"gen_ai.usage.{ours}"] = value
    return attrs


def _provider_response_id(rid: str) -> str:
    """The provider's own id of a response. LiteLLM hands out Responses API ids with its
    routing packed in (``resp_`` + base64 of provider, model and id); the gateway recorded the
    provider's id, and the converter joins the two spans by it."""
    if not rid.startswith("resp_"):
        return rid
    try:
        from litellm.responses.utils import ResponsesAPIRequestUtils

        return str(ResponsesAPIRequestUtils.decode_responses_api_response_id(rid).get("response_id") or rid)
    except Exception:  # another LiteLLM: keep the id as given
        return rid


class LiteLLMInstrumentor(Instrumentor):
    """Records every LiteLLM completion in this process, through LiteLLM's callback manager."""

    name, title, supported_versions = "litellm", "LiteLLM", SUPPORTED_VERSIONS

    def _instrument(self, tracer: trace.Tracer, options: Options) -> None:
        import litellm

        self._handler = TracerlLiteLLMLogger(tracer, capture_content=options.capture_content, tracing=options.tracing)
        litellm.logging_callback_manager.add_litellm_callback(self._handler)
        register_flush_hook(self._handler.flush)

    def _uninstrument(self) -> None:
        import litellm

        # our logger out of every callback list LiteLLM copied it into
        litellm.logging_callback_manager.remove_callback_from_all_lists(self._handler)
        unregister_flush_hook(self._handler.flush)


_instrumentor = LiteLLMInstrumentor()
instrument = _instrumentor.instrument
uninstrument = _instrumentor.uninstrument


def is_instrumented() -> bool:
    return _instrumentor.is_instrumented
