"""OpenTelemetry hook-up: where tracerl's spans (and every other span of the app) go.

:func:`setup_tracing` adds our span processors to the tracer provider the app already has,
or installs an SDK provider when there is none. It never replaces the user's tracing, and
calling it again with the same sinks adds nothing. tracerl's spans are ordinary SDK spans
from that provider: the user's own processors see them exactly as the SDK documents. We add:

* :class:`SessionSpanProcessor`, which stamps ``tracerl.session.id`` (from W3C baggage) on
  every span started inside a session, so spans of third-party instrumentors (OpenInference,
  OpenLLMetry) join the episode without knowing about tracerl;
* one ``BatchSpanProcessor`` into the SQLite span store (:class:`~.store.StoreExporter`), off the
  agent's thread: a session that names a store of its own (a training run's folder) has its
  spans written there only, every other span to the provider's shared store(s);
* a ``BatchSpanProcessor`` per OTLP/HTTP endpoint, when one is given.

The provider's resource names the app: its ``service.name`` is stored with each span, and
``tracerl traces export --service`` selects an app's episodes by it. A provider we install takes
``service_name``, else OpenTelemetry's ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (the
SDK reads them), else the SDK's ``unknown_service:python``; an app's own provider keeps its own.

What we attach to a provider is kept in a module-level weak mapping, never on the provider.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from . import semconv as sc
from .errors import ConfigError, MissingDependencyError
from .ids import TimeOrderedIdGenerator
from .store import SpanStore, StoreExporter, default_store_target, is_url, open_store

log = logging.getLogger(__name__)
TRACER_NAME = "tracerl"
_lock = threading.Lock()
_states: weakref.WeakKeyDictionary[TracerProvider, Tracing] = weakref.WeakKeyDictionary()
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
    """Copy the session id and the run id from baggage onto each span, as ``tracerl.session.id``
    and ``tracerl.run.id``."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        entries = baggage.get_all(parent_context)
        if not entries:
            return
        attributes = span.attributes or {}
        sid = entries.get(sc.BAGGAGE_SESSION_KEY)
        if sid and not attributes.get(sc.SESSION_ID):
            span.set_attribute(sc.SESSION_ID, str(sid))
        run = entries.get(sc.BAGGAGE_RUN_KEY)
        if run and not attributes.get(sc.RUN_ID):
            span.set_attribute(sc.RUN_ID, str(run))


@dataclass
class Tracing:
    """What :func:`setup_tracing` attached to one provider."""

    provider: TracerProvider
    router: StoreExporter = field(default_factory=StoreExporter)
    stores: dict[str, SpanStore] = field(default_factory=dict)  # every store opened, by path
    sinks: set[str] = field(default_factory=set)
    processors: list[SpanProcessor] = field(default_factory=list)  # ours, in the order added
    tracers: dict[str, trace.Tracer] = field(default_factory=dict)  # get_tracer costs ~50 µs a call
    unapplied: set[str] = field(default_factory=set)  # service names asked for too late (warned once)

    def store(self, store: SpanStore | str) -> SpanStore:
        """The store at this path (opened once), or ``store`` itself, registered here. Keyed
        by the absolute path: ``runs/eval`` from two working folders is two stores."""
        if isinstance(store, SpanStore):
            return self.stores.setdefault(_key(store.path), store)
        path = str(store)
        found = self.stores.get(_key(path))
        if found is None:
            found = self.stores[_key(path)] = open_store(path)
        return found

    def release(self, store: SpanStore) -> None:
        """Close ``store`` and forget it: a later run on the same path opens it afresh."""
        if self.stores.get(_key(store.path)) is store:
            del self.stores[_key(store.path)]
        store.close()

    def claim(self, keys: Sequence[str], store: SpanStore | str) -> SpanStore:
        """Write the spans of these sessions / traces to ``store`` and to no shared store."""
        found = self.store(store)
        self.router.claim(keys, found)
        return found

    def claim_for_otlp(self, keys: Sequence[str]) -> None:
        """Write the spans of these sessions / traces to no store: they leave over OTLP only."""
        self.router.claim(keys, None)

    def default_store(self) -> SpanStore | None:
        """The first shared store: where spans of sessions that claim none are read from."""
        return self.router.shared[0] if self.router.shared else None

    def flush(self, timeout_ms: int = 30_000) -> bool:
        """Wait for adapters that record after the call returns, then export what our
        processors hold (the user's own processors keep their own schedule)."""
        for hook in list(_flush_hooks):
            hook(timeout_ms / 1000)
        return all([p.force_flush(timeout_ms) for p in self.processors])

    def tracer(self, name: str = TRACER_NAME) -> trace.Tracer:
        """The SDK tracer ``name`` of this provider."""
        found = self.tracers.get(name)
        if found is None:
            found = self.tracers[name] = self.provider.get_tracer(name)
        return found


def _key(path: str) -> str:
    return path if path == ":memory:" or is_url(path) else os.path.abspath(path)


def _sdk_provider(provider: Any | None, service_name: str | None = None) -> TracerProvider:
    if provider is not None:
        if not isinstance(provider, TracerProvider):
            raise ConfigError(
                f"tracer_provider must be an opentelemetry-sdk TracerProvider, got {type(provider).__name__}"
            )
        return provider
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; service_name wins over both
    resource = Resource.create({SERVICE_NAME: service_name} if service_name else None)
    trace.set_tracer_provider(TracerProvider(id_generator=_id_generator(), resource=resource))
    # set_tracer_provider refuses a second provider; use whatever won.
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        raise ConfigError(
            "the global OpenTelemetry tracer provider is not an SDK TracerProvider; pass "
            "tracer_provider= explicitly"
        )
    return current


def _id_generator() -> IdGenerator:
    """Time-ordered trace ids, cheaper for the store to index (ids.py), unless the user named a
    generator in OpenTelemetry's own variable (loaded from its entry point, as the SDK's
    auto-configuration does)."""
    chosen = os.environ.get("OTEL_PYTHON_ID_GENERATOR", "").strip()
    if not chosen:
        return TimeOrderedIdGenerator()
    for entry in importlib.metadata.entry_points(group="opentelemetry_id_generator", name=chosen):
        return entry.load()()
    raise ConfigError(f"OTEL_PYTHON_ID_GENERATOR={chosen!r} names no installed id generator; install the "
                      "package that provides it, or unset the variable")


def setup_tracing(
    store: SpanStore | str | None = None,
    *,
    otlp_endpoint: str | None = None,
    otlp_headers: dict[str, str] | None = None,
    tracer_provider: TracerProvider | None = None,
    use_store: bool = True,
    service_name: str | None = None,
) -> Tracing:
    """Attach tracerl's processors to ``tracer_provider`` (default: the global one).

    ``store``: a :class:`SpanStore` or a path, written with every span no session claims;
    by default the store this provider already writes to (so ``setup_tracing(my_store,
    tracer_provider=p)`` then ``tracerl.instrument(..., tracer_provider=p)`` keeps writing to
    ``my_store`` alone), else :func:`~.store.default_store_target`. ``use_store=False`` adds no
    shared store (sessions that name their own still get theirs).
    ``otlp_endpoint``: also export to an OTLP/HTTP collector, e.g. ``http://127.0.0.1:4318``.
    ``service_name``: the app's OpenTelemetry ``service.name`` when this call installs the
    provider (default: ``OTEL_SERVICE_NAME``); a provider that exists already keeps its resource's
    (a resource is fixed when the provider is made), and a different name is warned about once.
    Idempotent per provider and sink.
    """
    if service_name is not None and (not isinstance(service_name, str) or not service_name.strip()):
        raise ConfigError(f"service_name={service_name!r}: name the app with a non-empty string, e.g. "
                          "service_name='unit-converter' (or leave it out and set OTEL_SERVICE_NAME)")
    with _lock:
        provider = _sdk_provider(tracer_provider, service_name)
        state = _states.get(provider)
        if state is None:
            state = _states[provider] = Tracing(provider=provider)
            _add(state, SessionSpanProcessor())
            # A deep queue: the SDK's default (2,048) drops spans, training data, when a burst
            # of agents outruns one SQLite writer for a moment; a span is ~1-2 kB queued.
            _add(state, BatchSpanProcessor(state.router, max_queue_size=1 << 16))
        if use_store and not (store is None and state.router.shared):
            chosen = state.store(store if store is not None else default_store_target())
            if f"store:{chosen.path}" not in state.sinks:
                state.router.shared.append(chosen)
                state.sinks.add(f"store:{chosen.path}")
        if otlp_endpoint and f"otlp:{otlp_endpoint}" not in state.sinks:
            _add(state, BatchSpanProcessor(_otlp_exporter(otlp_endpoint, otlp_headers)))
            state.sinks.add(f"otlp:{otlp_endpoint}")
        _check_service(state, service_name)
        return state


def _check_service(state: Tracing, service_name: str | None) -> None:
    """Say once when ``service_name`` cannot apply: the provider was made with another."""
    named = state.provider.resource.attributes.get(SERVICE_NAME)
    if service_name is None or named == service_name or service_name in state.unapplied:
        return
    state.unapplied.add(service_name)
    log.warning("tracerl: service_name=%r is not applied: the TracerProvider was made before, with service.name "
                "%r, and a provider's resource is fixed when it is made. Pass service_name to the first tracerl "
                "call of the process, set OTEL_SERVICE_NAME, or make your provider with "
                "Resource.create({'service.name': %r})", service_name, named, service_name)


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
    return _states.get(provider) if isinstance(provider, TracerProvider) else None


def get_tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)
