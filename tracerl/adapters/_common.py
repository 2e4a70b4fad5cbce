"""What every adapter shares: the tracer, HTTP propagation, and message conversion.

Adapters write OTel GenAI semantic-convention spans plus ``tracerl.*`` attributes. Each LLM
span is made the current span while the framework performs the HTTP call, and the httpx /
httpx2 clients (openai 3.x talks through httpx2, litellm through httpx) and aiohttp sessions
(LiteLLM's ``aiohttp_openai/`` provider) send W3C ``traceparent`` and ``baggage``: the
gateway's token-level span then becomes a child of the adapter's span, and the session id
reaches the gateway even without a session URL.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import os
import threading
from typing import Any

from opentelemetry import baggage as otel_baggage
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tracerl.core import _json
from tracerl.core.errors import ConfigError
from tracerl.core.messages import genai_doc
from tracerl.core.otel import TRACER_NAME, Tracing, setup_tracing

log = logging.getLogger(__name__)
_BAGGAGE_KEY = getattr(otel_baggage, "_BAGGAGE_KEY", None)  # where the API keeps baggage in a Context
_lock = threading.Lock()
_http_users: set[str] = set()  # adapters that asked for HTTP propagation
_patched: list[tuple[Any, str]] = []  # (class, method) wrapped to inject W3C headers


def tracing_for(store: Any = None, otlp_endpoint: str | None = None, tracer_provider: Any = None,
                use_store: bool = True) -> Tracing:
    """The tracing an adapter writes to: our processors on the user's (or a new) provider."""
    return setup_tracing(store, otlp_endpoint=otlp_endpoint, tracer_provider=tracer_provider, use_store=use_store)


CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_VALUES = {"true": True, "span_only": True, "span_and_event": True,
                   "false": False, "no_content": False, "event_only": False}  # tracerl writes no events


def capture_content(option: bool | None = None) -> bool:
    """Whether adapters record message content (messages, tool definitions, tool arguments and
    results): ``option`` when given, else OpenTelemetry's own switch for GenAI
    instrumentations, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, else yes.

    tracerl records content by default, unlike OpenTelemetry's instrumentations: without a
    gateway the spans' messages are the training data. With it off, spans keep their
    structure (names, model, usage, ids) and episodes through the gateway are the same, since
    the gateway's span holds the messages and the token ids."""
    raw = os.environ.get(CAPTURE_CONTENT_ENV, "").strip()
    if option is not None:
        capture = bool(option)
    elif not raw:
        capture = True
    elif raw.lower() in _CONTENT_VALUES:
        capture = _CONTENT_VALUES[raw.lower()]
    else:
        raise ConfigError(f"{CAPTURE_CONTENT_ENV}={raw!r} is not a setting tracerl knows; use one of "
                          f"{sorted(_CONTENT_VALUES)} (case-insensitive), or pass capture_content= to "
                          "tracerl.instrument")
    if not capture:
        log.info("tracerl: message content is not recorded on the framework's spans (%s): they train "
                 "only joined to the gateway's spans", "capture_content=False" if option is not None
                 else f"{CAPTURE_CONTENT_ENV}={raw}")
    return capture


def tracer(tracing: Tracing, name: str) -> trace.Tracer:
    return tracing.tracer(f"{TRACER_NAME}.{name}")


def set_attributes(span: trace.Span, build: Any, *args: Any) -> None:
    """``span.set_attributes(build(*args))`` if the span records; a builder that raises costs
    its attributes (logged), never the span or the framework's call.

    Built now, not when the span is replayed: the JSON strings are all that outlive the call,
    while deferring the build would keep the framework's result objects alive until then and
    the garbage collector pays about as much for that as the build costs (measured: 8-12 us per LLM
    call of extra collection, bench/instrument_overhead.py --account)."""
    if not span.is_recording():
        return
    try:
        attributes = build(*args)
    except Exception:
        log.warning("tracerl: could not record the attributes of span %r", getattr(span, "name", "?"),
                    exc_info=True)
        return
    span.set_attributes(attributes)


def _inject(headers: Any) -> None:
    # The global propagator (W3C tracecontext + baggage by default) writes nothing when there
    # is no current span and no baggage, so calls outside a session are left untouched.
    textmap = propagate.get_global_textmap()
    if textmap is not _w3c[0]:
        _w3c[:] = [textmap, _is_default_w3c(textmap)]
    if not _w3c[1]:  # the user configured other propagators: theirs decide
        propagate.inject(headers)
        return
    # The default W3C pair, written here: the same headers for ~1/3 of the CPU (this runs on
    # every LLM call). A session's baggage is one object for all its calls: encoded once.
    ctx = otel_context.get_current()
    span_context = trace.get_current_span(ctx).get_span_context()
    if span_context != trace.INVALID_SPAN_CONTEXT:
        headers["traceparent"] = (f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
                                  f"{span_context.trace_flags:02x}")
        if span_context.trace_state:
            headers["tracestate"] = span_context.trace_state.to_header()
    entries = ctx.get(_BAGGAGE_KEY)
    if entries:
        if entries is not _baggage[0]:
            carrier: dict[str, str] = {}
            W3CBaggagePropagator().inject(carrier, ctx)
            _baggage[:] = [entries, carrier.get("baggage")]
        if _baggage[1]:
            headers["baggage"] = _baggage[1]


_w3c: list[Any] = [None, False]  # (global propagator, whether it is the default W3C pair)
_baggage: list[Any] = [None, None]  # (last baggage mapping, its header)


def _is_default_w3c(textmap: Any) -> bool:
    return (isinstance(textmap, CompositePropagator) and _BAGGAGE_KEY is not None
            and [type(p) for p in getattr(textmap, "_propagators", ())]
            == [TraceContextTextMapPropagator, W3CBaggagePropagator])


def _patch(cls: Any) -> None:
    original = cls.send
    if getattr(original, "_tracerl_original", None) is not None:
        return
    if inspect.iscoroutinefunction(original):

        async def send(self: Any, request: Any, **kwargs: Any) -> Any:
            _inject(request.headers)
            return await original(self, request, **kwargs)
    else:

        def send(self: Any, request: Any, **kwargs: Any) -> Any:
            _inject(request.headers)
            return original(self, request, **kwargs)

    send._tracerl_original = original  # type: ignore[attr-defined]
    functools.update_wrapper(send, original)
    cls.send = send
    _patched.append((cls, "send"))


def _patch_aiohttp(cls: Any) -> None:
    """aiohttp.ClientSession._request, which every get/post/request goes through: merge the
    W3C headers into the call's headers (a header the caller set wins)."""
    original = cls._request
    if getattr(original, "_tracerl_original", None) is not None:
        return

    async def _request(self: Any, method: str, str_or_url: Any, *args: Any, **kwargs: Any) -> Any:
        carrier: dict[str, str] = {}
        _inject(carrier)
        if carrier:
            from multidict import CIMultiDict

            headers = CIMultiDict(kwargs.get("headers") or ())
            for key, value in carrier.items():
                headers.setdefault(key, value)
            kwargs["headers"] = headers
        return await original(self, method, str_or_url, *args, **kwargs)

    _request._tracerl_original = original  # type: ignore[attr-defined]
    functools.update_wrapper(_request, original)
    cls._request = _request
    _patched.append((cls, "_request"))


def enable_http_propagation(user: str, tracer_provider: Any = None) -> None:
    """Send W3C traceparent + baggage on every httpx/httpx2/aiohttp request, while any adapter
    needs it. Reversible wrappers of ``Client.send`` and ``ClientSession._request``: unlike the
    OpenTelemetry httpx instrumentors they create no span per request (half the cost per LLM
    call, measured in bench/instrument_overhead.py)."""
    with _lock:
        _http_users.add(user)
        if _patched:
            return
        for module_name in ("httpx", "httpx2"):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            _patch(module.Client)
            _patch(module.AsyncClient)
        try:
            import aiohttp
        except ImportError:
            return
        _patch_aiohttp(aiohttp.ClientSession)


def disable_http_propagation(user: str) -> None:
    with _lock:
        _http_users.discard(user)
        if _http_users:
            return
        while _patched:
            cls, name = _patched.pop()
            setattr(cls, name, getattr(cls, name)._tracerl_original)


def openai_messages_json(items: Any, *, dicts_only: bool = False) -> str:
    """OpenAI Chat Completions messages (dicts, or pydantic objects unless ``dicts_only``) as
    a GenAI ``gen_ai.*.messages`` JSON string: the text :func:`~tracerl.core.messages.
    genai_message_json` writes for the same messages, built straight from the dicts (every
    message of every call goes through here, so no Message objects in between), each dict's
    JSON taken from :data:`_fragments` when a message like it was written before."""
    frags = []
    for m in items or ():
        if not isinstance(m, dict):
            if dicts_only:
                continue
            m = m.model_dump() if hasattr(m, "model_dump") else {}
        frags.append(_fragments.json(m))
    return "[" + ",".join(frags) + "]"


class _Fragments:
    """Each OpenAI-format message's GenAI JSON, kept by what it is made of.

    Every LLM call records its whole conversation, so without this an adapter's cost per call
    grows with the conversation (0.75 us per message warm; bench/adapter_parts.py --history).
    A LangChain message is one object from call to call (its adapter keeps the JSON by object),
    but the Agents SDK builds new dicts for every call, and a LiteLLM app may too: so the key
    is what the JSON is made of, the role, the text, the tool-call id and each tool call's
    (id, name, arguments), as strings; a message holding anything else is written each time.
    Only strings are kept (nothing a garbage collection traverses): at most ``size`` messages
    and about ``chars`` characters (their text and their JSON), so an app of long prompts does
    not hold megabytes of them."""

    def __init__(self, size: int = 4096, chars: int = 4_000_000):
        self.size, self.chars = size, chars
        self._cache: dict[tuple[Any, ...], str] = {}
        self._held = 0  # characters held, approximately: twice each fragment's

    def json(self, m: dict[str, Any]) -> str:
        key = _fragment_key(m)
        if key is None:
            return _json.dumps(_openai_doc(m))
        cache = self._cache
        frag = cache.get(key)
        if frag is None:
            frag = _json.dumps(_openai_doc(m))
            if len(cache) >= self.size or self._held > self.chars:  # old conversations: start over
                cache.clear()
                self._held = 0
            cache[key] = frag
            self._held += 2 * len(frag)
        return frag


def _fragment_key(m: dict[str, Any]) -> tuple[Any, ...] | None:
    """Everything :func:`_openai_doc` reads of ``m``, when all of it is str or None."""
    role, content, call_id, calls = m.get("role"), m.get("content"), m.get("tool_call_id"), m.get("tool_calls")
    if not ((role is None or type(role) is str) and (content is None or type(content) is str)
            and (call_id is None or type(call_id) is str)):
        return None
    if not calls:
        return role, content, call_id
    key = [role, content, call_id]
    for tc in calls:
        fn = tc.get("function") if type(tc) is dict else None
        if type(fn) is not dict:
            return None
        parts = tc.get("id"), fn.get("name"), fn.get("arguments")
        for value in parts:
            if value is not None and type(value) is not str:
                return None
        key += parts
    return tuple(key)


_fragments = _Fragments()


def _openai_doc(m: dict[str, Any]) -> dict[str, Any]:
    content = m.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict)) or None
    elif not isinstance(content, str):
        content = None
    calls = []
    for tc in m.get("tool_calls") or ():
        if isinstance(tc, dict):
            fn = tc.get("function") or {}
            call_id = tc.get("id")
            calls.append((None if call_id is None else str(call_id), str(fn.get("name", "")),
                          str(fn.get("arguments") or "{}")))
    call_id = m.get("tool_call_id")
    return genai_doc(str(m.get("role") or "user"), content, calls,
                     tool_call_id=None if call_id is None else str(call_id))
