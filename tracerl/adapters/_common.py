"""What every adapter shares: the tracer, HTTP propagation, and message conversion.

Adapters write OTel GenAI semantic-convention spans plus ``tracerl.*`` attributes. Each LLM
span is made the current span while the framework performs the HTTP call, and the httpx /
httpx2 clients (openai 3.x talks through httpx2, litellm through httpx) are instrumented to
send W3C ``traceparent`` and ``baggage``: the gateway's token-level span then becomes a child
of the adapter's span, and the session id reaches the gateway even without a session URL.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry import trace

from tracerl.core.otel import TRACER_NAME, Tracing, setup_tracing

log = logging.getLogger(__name__)
_lock = threading.Lock()
_http_users: set[str] = set()  # adapters that asked for HTTP propagation
_http_instrumentors: list[Any] = []


def tracing_for(store: Any = None, otlp_endpoint: str | None = None, tracer_provider: Any = None,
                use_store: bool = True) -> Tracing:
    """The tracing an adapter writes to: our processors on the user's (or a new) provider."""
    return setup_tracing(store, otlp_endpoint=otlp_endpoint, tracer_provider=tracer_provider, use_store=use_store)


def tracer(tracing: Tracing, name: str) -> trace.Tracer:
    return tracing.provider.get_tracer(f"{TRACER_NAME}.{name}")


def enable_http_propagation(user: str, tracer_provider: Any) -> None:
    """Instrument httpx and httpx2 clients once, for as long as any adapter needs it."""
    with _lock:
        _http_users.add(user)
        if _http_instrumentors:
            return
        try:
            from opentelemetry.instrumentation.httpx import (
                HTTPX2ClientInstrumentor,
                HTTPXClientInstrumentor,
            )
        except ImportError:  # pragma: no cover - optional: sessions in the URL still work
            log.info("opentelemetry-instrumentation-httpx is not installed: no traceparent on LLM calls; "
                     "joins fall back to response id and order")
            return
        for cls in (HTTPXClientInstrumentor, HTTPX2ClientInstrumentor):
            inst = cls()
            if not inst.is_instrumented_by_opentelemetry:
                inst.instrument(tracer_provider=tracer_provider)
                _http_instrumentors.append(inst)


def disable_http_propagation(user: str) -> None:
    with _lock:
        _http_users.discard(user)
        if _http_users:
            return
        while _http_instrumentors:
            _http_instrumentors.pop().uninstrument()
