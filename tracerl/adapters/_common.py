"""What every adapter shares: content capture, HTTP propagation, and message conversion.

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

from opentelemetry import propagate, trace

from tracerl.core import _json
from tracerl.core.errors import ConfigError
from tracerl.core.messages import genai_doc

log = logging.getLogger(__name__)
_lock = threading.Lock()
_http_users: set[str] = set()  # adapters that asked for HTTP propagation
_patched: list[tuple[Any, str]] = []  # (class, method) wrapped to inject W3C headers


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


def set_attributes(span: trace.Span, build: Any, *args: Any) -> None:
    """``span.set_attributes(build(*args))`` if the span records; a builder that raises costs
    its attributes (logged), never the span or the framework's call."""
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
    propagate.inject(headers)


def _patch(cls: Any) -> None:
    original = cls.send
    if getattr(original, "_tracerl_original", None) is not None:
        return
    send: Any
    if inspect.iscoroutinefunction(original):

        async def send_async(self: Any, request: Any, **kwargs: Any) -> Any:
            _inject(request.headers)
            return await original(self, request, **kwargs)

        send = send_async
    else:

        def send_sync(self: Any, request: Any, **kwargs: Any) -> Any:
            _inject(request.headers)
            return original(self, request, **kwargs)

        send = send_sync
    send._tracerl_original = original
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


def enable_http_propagation(user: str) -> None:
    """Send W3C traceparent + baggage on every httpx/httpx2/aiohttp request, while any adapter
    needs it. Reversible wrappers of ``Client.send`` and ``ClientSession._request`` (the one
    method every aiohttp request goes through; private, hence checked by a test): unlike the
    OpenTelemetry httpx instrumentors they create no span per request, which training does not
    need (the gateway's span is the call's)."""
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
    genai_message_json` writes for the same messages, built straight from the dicts."""
    docs = []
    for m in items or ():
        if not isinstance(m, dict):
            if dicts_only:
                continue
            m = m.model_dump() if hasattr(m, "model_dump") else {}
        docs.append(_openai_doc(m))
    return _json.dumps(docs)


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
