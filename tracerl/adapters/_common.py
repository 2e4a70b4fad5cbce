"""What every adapter shares: content capture, HTTP propagation, and message conversion.

Adapters write OTel GenAI semantic-convention spans plus ``tracerl.*`` attributes. Each LLM
span is made the current span while the framework performs the HTTP call, and the httpx /
httpx2 clients (openai 3.x talks through httpx2, litellm through httpx) and aiohttp sessions
(LiteLLM's ``aiohttp_openai/`` provider) send W3C ``traceparent`` and ``baggage``: the
gateway's token-level span then becomes a child of the adapter's span, and the session id
reaches the gateway even without a session URL (the wrappers: :mod:`tracerl.core.propagation`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from opentelemetry import trace

from tracerl.core import _json
from tracerl.core.errors import ConfigError
from tracerl.core.messages import genai_doc
from tracerl.core.propagation import disable_http_propagation, enable_http_propagation

__all__ = ["capture_content", "disable_http_propagation", "enable_http_propagation", "openai_messages_json",
           "set_attributes"]

log = logging.getLogger(__name__)


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
