"""Framework adapters: one line turns an agent's framework calls into training traces.

    tracerl.instrument("langgraph")      # or "langchain", "all"

Each adapter is a module with idempotent ``instrument()`` / ``uninstrument()`` on the
framework's own extension point (LangChain's configure hook for callbacks). Spans go to the
span store by default (``store=``), to an OTLP endpoint when ``otlp_endpoint=`` is given,
through the app's own TracerProvider when it has one.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from tracerl.core.errors import ConfigError

# framework name -> adapter module (LangGraph runs on LangChain's callback system)
ADAPTERS: dict[str, str] = {
    "langchain": "tracerl.adapters.langchain",
    "langgraph": "tracerl.adapters.langchain",
    "litellm": "tracerl.adapters.litellm",
    "openai-agents": "tracerl.adapters.openai_agents",
}


def _modules(framework: str) -> list[Any]:
    if framework == "all":
        names = sorted(set(ADAPTERS.values()))
    elif framework in ADAPTERS:
        names = [ADAPTERS[framework]]
    else:
        raise ConfigError(f"unknown framework {framework!r}; choose one of {sorted(ADAPTERS)} or 'all'")
    return [importlib.import_module(n) for n in names]


def instrument(framework: str = "all", **options: Any) -> None:
    """Instrument ``framework`` ("all": every adapter whose framework is installed).

    Options every adapter takes: ``store``, ``otlp_endpoint``, ``tracer_provider``,
    ``propagate``, ``capture_content`` (``False``: no message content on the spans; the
    default comes from ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, else on). An
    adapter-specific one (``workflow_spans=True``: LangChain/LangGraph graph and node spans,
    the Agents SDK's workflow span) goes to the adapters that take it; one that no selected
    adapter takes is an error."""
    modules = _modules_installed(framework)
    accepted = [set(inspect.signature(m.instrument).parameters) for m in modules]
    unknown = sorted(set(options) - set().union(*accepted)) if modules else []
    if unknown:
        raise ConfigError(f"tracerl.instrument({framework!r}) got unknown option(s) {unknown}; "
                          f"the options are {sorted(set().union(*accepted))}")
    for module, names in zip(modules, accepted):
        module.instrument(**{k: v for k, v in options.items() if k in names})


def uninstrument(framework: str = "all") -> None:
    for module in _modules_installed(framework):
        module.uninstrument()


def _modules_installed(framework: str) -> list[Any]:
    if framework != "all":
        return _modules(framework)
    out = []
    for name in sorted(set(ADAPTERS.values())):
        try:
            out.append(importlib.import_module(name))
        except ImportError:  # that framework is not installed: nothing to instrument
            continue
    return out
