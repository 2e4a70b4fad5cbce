"""OpenTelemetry hook-up: where tracerl's spans (and every other span of the app) go.

:func:`setup_tracing` adds our span processors to the tracer provider the app already has,
or installs an SDK provider when there is none. It never replaces the user's tracing, and
calling it again with the same sinks adds nothing. Two processors matter:

* :class:`SessionSpanProcessor` stamps ``tracerl.session.id`` (from W3C baggage) on every
  span started inside a session, so spans of third-party instrumentors (OpenInference,
  OpenLLMetry) join the episode without knowing about tracerl;
* a ``BatchSpanProcessor`` per sink: the SQLite :class:`~.store.SpanStore` by default, and
  an OTLP/HTTP exporter when an endpoint is given.

tracerl's own spans come from :meth:`Tracing.tracer` and are deferred (:mod:`.deferred`):
they reach these processors in batches when they end, and every flush replays them first.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from . import deferred
from . import semconv as sc
from .errors import ConfigError, MissingDependencyError
from .ids import ids_for
from .store import SpanStore, StoreExporter

log = logging.getLogger(__name__)
TRACER_NAME = "tracerl"
_lock = threading.Lock()
# Adapters whose framework reports calls on a worker thread after returning (LiteLLM) register
# a hook here that waits for those reports; Tracing.flush runs them before exporting.
_flush_hooks: list[Callable[[float], None]] = []


def register_flush_hook(hook: Callable[[float], None]) -> None:
    if hook not in _flush_hooks:
        _flush_hooks.append(hook)


def unregister_flush_hook(hook: Callable[[float], None]) -> None:
    if hook in _flush_hooks:
        _flush_hooks.remove(hook)


class SessionSpanProcessor(SpanProcessor):
    """Copy the session id from baggage onto each span as ``tracerl.session.id``; and, as the
    first of our processors, replay the deferred spans before a flush (:mod:`.deferred`)."""

    def __init__(self, provider: TracerProvider | None = None):
        self._provider = provider

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        # the SDK span's own attributes: its public property wraps them in a new read-only
        # proxy whose lookups lock (this runs for every span of the process)
        attrs = getattr(span, "_attributes", None)
        sid = session_to_stamp(span.attributes if attrs is None else attrs, parent_context)
        if sid:
            span.set_attribute(sc.SESSION_ID, sid)

    def on_end(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        deferred.drain()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        # Deferred spans ended so far reach every processor first; those the provider flushed
        # before this one get flushed again if that brought them any.
        if deferred.drain() and self._provider is not None:
            for processor in getattr(getattr(self._provider, "_active_span_processor", None), "_span_processors", ()):
                if processor is self:
                    break
                processor.force_flush(timeout_millis)
        return True


def session_to_stamp(attributes: Any, parent_context: Context | None) -> str | None:
    """The session id :class:`SessionSpanProcessor` stamps on a span starting in
    ``parent_context`` with these attributes (None: nothing to stamp)."""
    sid = baggage.get_baggage(sc.BAGGAGE_SESSION_KEY, parent_context)
    if not sid or (attributes and attributes.get(sc.SESSION_ID)):
        return None
    return str(sid)


@dataclass
class Tracing:
    """What :func:`setup_tracing` attached to one provider."""

    provider: TracerProvider
    stores: dict[str, SpanStore] = field(default_factory=dict)
    sinks: set[str] = field(default_factory=set)
    processors: list[SpanProcessor] = field(default_factory=list)  # ours, in the order added
    _tracers: dict[str, Any] = field(default_factory=dict, repr=False)

    def direct_stores(self) -> list[SpanStore] | None:
        """Our stores, when the provider's processors are ours alone and only write to them:
        deferred spans may then be stored without the SDK (see :mod:`.deferred`)."""
        active = getattr(getattr(self.provider, "_active_span_processor", None), "_span_processors", None)
        if (any(sink.startswith("otlp:") for sink in self.sinks) or active is None or len(active) != len(self.processors)
                or any(a is not b for a, b in zip(active, self.processors, strict=True))):
            return None
        return list(self.stores.values())

    def flush(self, timeout_ms: int = 30_000) -> bool:
        """Wait for adapters that record after the call returns, then export everything."""
        for hook in list(_flush_hooks):
            hook(timeout_ms / 1000)
        return bool(self.provider.force_flush(timeout_ms))  # our SessionSpanProcessor replays deferred spans first

    def tracer(self, name: str = TRACER_NAME) -> trace.Tracer:
        """tracerl's tracer ``name`` on this provider: its spans are deferred (:mod:`.deferred`),
        so what the SDK does with them is done in batches, off the caller's thread; with
        ``TRACERL_LIVE_SPANS=1`` in the environment (read once per tracer), plain SDK spans,
        for span processors that must see a span the moment it starts or ends."""
        found = self._tracers.get(name)
        if found is None:
            live = os.environ.get("TRACERL_LIVE_SPANS", "").strip().lower() in ("1", "true", "yes", "on")
            found = self.provider.get_tracer(name) if live else deferred.DeferredTracer(self, name)
            self._tracers[name] = found
        return found


def _sdk_provider(provider: Any | None) -> TracerProvider:
    if provider is not None:
        if not isinstance(provider, TracerProvider):
            raise ConfigError(
                f"tracer_provider must be an opentelemetry-sdk TracerProvider, got {type(provider).__name__}"
            )
        return provider
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    created = TracerProvider(id_generator=ids_for(RandomIdGenerator()))  # cheaper to index: see ids.py
    trace.set_tracer_provider(created)
    # set_tracer_provider refuses a second provider; use whatever won.
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        raise ConfigError(
            "the global OpenTelemetry tracer provider is not an SDK TracerProvider; pass "
            "tracer_provider= explicitly"
        )
    return current


def setup_tracing(
    store: SpanStore | str | None = None,
    *,
    otlp_endpoint: str | None = None,
    otlp_headers: dict[str, str] | None = None,
    tracer_provider: TracerProvider | None = None,
    use_store: bool = True,
) -> Tracing:
    """Attach tracerl's processors to ``tracer_provider`` (default: the global one).

    ``store``: a :class:`SpanStore` or a path; by default the store this provider already
    writes to (so ``setup_tracing(my_store, tracer_provider=p)`` then ``tracerl.instrument(...,
    tracer_provider=p)`` keeps writing to ``my_store`` alone), else :func:`~.store.default_store_path`.
    ``otlp_endpoint``: also export to an OTLP/HTTP collector, e.g. ``http://127.0.0.1:4318``.
    Idempotent per provider and sink.
    """
    with _lock:
        provider = _sdk_provider(tracer_provider)
        state: Tracing | None = getattr(provider, "_tracerl_state", None)
        if state is None:
            state = Tracing(provider=provider)
            provider._tracerl_state = state  # type: ignore[attr-defined]
            _add(state, SessionSpanProcessor(provider))
        if use_store and not (store is None and state.stores):
            st = store if isinstance(store, SpanStore) else None
            path = st.path if st is not None else str(store) if store is not None else None
            if path is None:
                from .store import default_store_path

                path = str(default_store_path())
            if f"store:{path}" not in state.sinks:
                st = st or SpanStore(path)
                state.stores[path] = st
                # A deep queue: the SDK's default (2,048) drops spans, training data, when a burst
                # of agents outruns one SQLite writer for a moment; a span is ~1-2 kB queued.
                # A write every 5 s (the SDK's default, as the deferred spans' replay): each
                # SQLite commit costs ~0.3 ms of CPU (WAL pages written), so spans per commit
                # set the export cost per span (~24 us at 22 per commit, ~18 at 100:
                # `bench/instrument_overhead.py --export`). Whoever needs the spans now (an
                # episode ending, Tracing.flush) flushes them.
                _add(state, BatchSpanProcessor(StoreExporter(st), schedule_delay_millis=5000,
                                               max_queue_size=1 << 16))
                state.sinks.add(f"store:{path}")
        if otlp_endpoint and f"otlp:{otlp_endpoint}" not in state.sinks:
            _add(state, BatchSpanProcessor(_otlp_exporter(otlp_endpoint, otlp_headers)))
            state.sinks.add(f"otlp:{otlp_endpoint}")
        return state


def _add(state: Tracing, processor: SpanProcessor) -> None:
    state.provider.add_span_processor(processor)
    state.processors.append(processor)


def _otlp_exporter(endpoint: str, headers: dict[str, str] | None) -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise MissingDependencyError("opentelemetry-exporter-otlp-proto-http", "otlp", "OTLP export") from exc
    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    return OTLPSpanExporter(endpoint=url, headers=headers)


def tracing_state(tracer_provider: TracerProvider | None = None) -> Tracing | None:
    """The tracing set up on a provider (the global one by default), if any."""
    provider = tracer_provider or trace.get_tracer_provider()
    return getattr(provider, "_tracerl_state", None)


def get_tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)
