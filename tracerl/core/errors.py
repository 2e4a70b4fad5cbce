"""The tracerl error tree. Every error says what went wrong, why, and how to fix it.

    TracerlError
    ├── ConfigError            bad or missing settings (a path, a URL, an option, a model folder)
    │   └── RunError           (tracerl.runs.folder) a folder that is not a run, or a run that
    │                          cannot be read
    ├── MissingDependencyError an optional extra is not installed (message has the pip line);
    │                          also an ImportError
    ├── SpanDecodeError        an OTLP body or a JSON-lines record could not be decoded; also a ValueError
    ├── StoreError             the span store could not be opened, read or written
    ├── RolloutError           every rollout of a training step (or an evaluation) failed
    ├── GradingError           a reward function could not grade an episode (the episode is kept
    │                          with termination reason ``grading_error``, never the run stopped)
    ├── UpstreamError          the model server behind the gateway failed or answered something
    │                          unusable (``status``: the HTTP status to answer with)
    ├── GatewayProcessError    the gateway's child process failed or died
    ├── ModelSetupError        ``tracerl model setup`` could not fetch, convert or verify a model
    ├── APIError               (tracerl.gateway.protocol) a request the gateway answers with an
    │                          OpenAI-style 4xx/5xx body; never escapes the gateway
    └── ExpressionError        (tracerl.tasks.synthetic) the calculator's input is not an
                               integer expression; also a ValueError

Errors about one episode or span carry its id (``episode_id`` / ``span_id``) so a log line
points at the data, the way httpx errors carry their request.
"""

from __future__ import annotations

from typing import Any


class TracerlError(Exception):
    """Base of all errors raised by tracerl."""

    def __init__(self, message: str, *, episode_id: str | None = None, span_id: str | None = None):
        super().__init__(message)
        self.episode_id = episode_id
        self.span_id = span_id


class ConfigError(TracerlError):
    """A setting is missing or invalid."""


class MissingDependencyError(TracerlError, ImportError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the '{package}' package, which is not installed. "
            f"Install it with: pip install 'tracerl[{extra}]'"
        )


def require(module: str, package: str, extra: str, purpose: str) -> Any:
    """``module``, imported, or a :class:`MissingDependencyError` naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package, extra, purpose) from exc


class SpanDecodeError(TracerlError, ValueError):
    """An OTLP request body or a JSON-lines span record is malformed."""


class StoreError(TracerlError):
    """The span store failed."""


class RolloutError(TracerlError):
    """Every rollout of a training step, or of an evaluation, failed."""


class GradingError(TracerlError):
    """A reward function could not grade an episode (a judge's unreadable reply, say)."""


class UpstreamError(TracerlError, RuntimeError):
    """The upstream model server failed or answered something unusable."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class GatewayProcessError(TracerlError):
    """The gateway's child process failed or died."""


class ModelSetupError(TracerlError):
    """A model could not be downloaded, converted or verified; nothing was left half-written."""
