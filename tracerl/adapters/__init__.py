"""Framework adapters: one line turns an agent's framework calls into training traces.

    tracerl.instrument("langgraph")      # or "langchain", "openai-agents", "litellm", "all"

Each adapter is an :class:`~.base.Instrumentor` on the framework's own extension point
(LangChain's configure hook for callbacks, the Agents SDK's trace processors, LiteLLM's
callback manager), writing ordinary OpenTelemetry SDK spans through the app's
TracerProvider (or a new one) into the span store, and an OTLP endpoint when given.
"""

from __future__ import annotations

import importlib
from typing import Any

from tracerl.core.errors import ConfigError

from .base import Instrumentor

# framework name -> adapter module (LangGraph runs on LangChain's callback system)
ADAPTERS: dict[str, str] = {
    "langchain": "tracerl.adapters.langchain",
    "langgraph": "tracerl.adapters.langchain",
    "litellm": "tracerl.adapters.litellm",
    "openai-agents": "tracerl.adapters.openai_agents",
}


def instrumentors(framework: str = "all") -> list[Instrumentor]:
    """The adapters ``framework`` names ("all": each whose framework is installed)."""
    if framework == "all":
        found = []
        for name in sorted(set(ADAPTERS.values())):
            try:
                found.append(importlib.import_module(name)._instrumentor)
            except ImportError:  # that framework is not installed: nothing to instrument
                continue
        return found
    if framework not in ADAPTERS:
        raise ConfigError(f"unknown framework {framework!r}; choose one of {sorted(ADAPTERS)} or 'all'")
    return [importlib.import_module(ADAPTERS[framework])._instrumentor]


def instrument(
    framework: str = "all",
    *,
    store: Any = None,
    otlp_endpoint: str | None = None,
    tracer_provider: Any = None,
    propagate: bool = True,
    capture_content: bool | None = None,
    service_name: str | None = None,
    workflow_spans: bool = False,
) -> None:
    """Record every LLM call (and tool run, agent, handoff) of ``framework`` in this process as
    OpenTelemetry spans. Idempotent: a second call logs and changes nothing.

    ``framework``: "langgraph", "langchain", "openai-agents", "litellm", or "all" (each one
    installed). ``store``: a :class:`~tracerl.SpanStore` or path for spans outside a session
    that names its own (default: the provider's store, else ``$TRACERL_HOME/traces.db``).
    ``otlp_endpoint``: also export to this OTLP/HTTP endpoint. ``tracer_provider``: an SDK
    ``TracerProvider`` to write through (default: the global one, installed if missing).
    ``propagate``: send W3C ``traceparent``/``baggage`` on the framework's HTTP calls, which
    joins the gateway's token-level span to the framework's. ``capture_content``: record
    messages, tool definitions and tool arguments (default: OpenTelemetry's
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, else yes). ``workflow_spans``: also
    a span per graph and node run (LangChain/LangGraph) or ``Runner.run`` (Agents SDK); with
    "all" it goes to the adapters that have them. ``service_name``: the app's OpenTelemetry
    ``service.name``, stored with each span (``tracerl traces export --service NAME`` exports
    that app's episodes); default ``OTEL_SERVICE_NAME``. It names the provider tracerl installs:
    an app's own ``tracer_provider``, or one installed before, keeps the name its resource has.
    """
    chosen = instrumentors(framework)
    for adapter in chosen:
        adapter.instrument(store=store, otlp_endpoint=otlp_endpoint, tracer_provider=tracer_provider,
                           propagate=propagate, capture_content=capture_content, service_name=service_name,
                           workflow_spans=workflow_spans and (adapter.has_workflow_spans or len(chosen) == 1))


def uninstrument(framework: str = "all") -> None:
    """Take ``framework``'s adapter out; the framework is left exactly as it was."""
    for adapter in instrumentors(framework):
        adapter.uninstrument()
