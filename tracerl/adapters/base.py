"""The shape of every adapter, after OpenTelemetry's instrumentors.

An adapter is an :class:`Instrumentor` subclass that knows its framework's hook and nothing
else: ``_instrument(tracer, options)`` registers a handler that writes spans with ``tracer``,
``_uninstrument()`` takes it out again. The base owns the rest, the same for every
framework: idempotent ``instrument()`` / ``uninstrument()`` that log a repeat instead of
raising, where the spans go (:func:`~tracerl.core.otel.setup_tracing`), whether message
content is recorded, and the W3C headers on the HTTP call that join the gateway's span to
the adapter's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from opentelemetry import trace

from tracerl.core.errors import ConfigError
from tracerl.core.otel import TRACER_NAME, Tracing, setup_tracing

from . import _common

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """What an adapter's handler is told at ``instrument()``."""

    capture_content: bool = True
    workflow_spans: bool = False
    # where a top-level run opens its episode when no session is open (tracerl.core.record)
    tracing: Tracing | None = None


class Instrumentor:
    """Idempotent ``instrument()`` / ``uninstrument()`` around one framework's hook."""

    name: ClassVar[str]  # the framework, as the user writes it ("langchain")
    title: ClassVar[str]  # as a log line writes it ("LangChain")
    supported_versions: ClassVar[str]  # e.g. "langchain-core >= 1.0"
    has_workflow_spans: ClassVar[bool] = False

    def __init__(self) -> None:
        self._propagating: bool | None = None  # None: not instrumented

    @property
    def is_instrumented(self) -> bool:
        return self._propagating is not None

    def instrument(self, *, store: Any = None, otlp_endpoint: str | None = None, tracer_provider: Any = None,
                   propagate: bool = True, capture_content: bool | None = None, service_name: str | None = None,
                   workflow_spans: bool = False) -> None:
        """Hook the framework; see :func:`tracerl.instrument` for the parameters."""
        if self.is_instrumented:
            log.info("tracerl: %s is already instrumented", self.title)
            return
        if workflow_spans and not self.has_workflow_spans:
            raise ConfigError(f"workflow_spans=True: the {self.title} adapter has no workflow spans (only the "
                              "LangChain/LangGraph and OpenAI Agents adapters do); leave it off")
        capture = _common.capture_content(capture_content)
        tracing = setup_tracing(store, otlp_endpoint=otlp_endpoint, tracer_provider=tracer_provider,
                                service_name=service_name)
        options = Options(capture_content=capture, workflow_spans=workflow_spans, tracing=tracing)
        self._instrument(tracing.tracer(f"{TRACER_NAME}.{self.name.replace('-', '_')}"), options)
        if propagate:
            _common.enable_http_propagation(self.name)
        self._propagating = propagate

    def uninstrument(self) -> None:
        """Take the hook out; the framework is left exactly as it was before."""
        if not self.is_instrumented:
            log.info("tracerl: %s is not instrumented", self.title)
            return
        self._uninstrument()
        if self._propagating:
            _common.disable_http_propagation(self.name)
        self._propagating = None

    # -- what each framework's adapter writes ---------------------------------------------

    def _instrument(self, tracer: trace.Tracer, options: Options) -> None:
        raise NotImplementedError

    def _uninstrument(self) -> None:
        raise NotImplementedError
