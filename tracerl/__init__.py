"""tracerl: train LLM agents with reinforcement learning from their OpenTelemetry traces.

The public API is what ``__all__`` lists. Importing tracerl does no work: names are loaded
on first use, so ``import tracerl`` pulls in neither torch nor any agent framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0.dev0"

_EXPORTS: dict[str, str] = {
    "TrainConfig": "tracerl.trainers.config",
    "TrainResult": "tracerl.trainers.loop",
    "train": "tracerl.trainers.loop",
    "EvalReport": "tracerl.trainers.evaluate",
    "evaluate": "tracerl.trainers.evaluate",
    "ConfigError": "tracerl.core.errors",
    "GatewayServer": "tracerl.gateway.server",
    "SamplingParams": "tracerl.engines.base",
    "TorchEngine": "tracerl.engines.torch_engine",
    "UpstreamEngine": "tracerl.engines.upstream",
    "episodes_from_sessions": "tracerl.core.convert",
    "Episode": "tracerl.core.types",
    "Message": "tracerl.core.types",
    "MissingDependencyError": "tracerl.core.errors",
    "RolloutConfig": "tracerl.core.rollout",
    "RolloutContext": "tracerl.core.rollout",
    "RolloutError": "tracerl.core.errors",
    "RolloutSettings": "tracerl.core.rollout",
    "Session": "tracerl.core.rollout",
    "SpanDecodeError": "tracerl.core.errors",
    "SpanRecord": "tracerl.core.spans",
    "SpanStore": "tracerl.core.store",
    "Step": "tracerl.core.types",
    "StoreError": "tracerl.core.errors",
    "StoreExporter": "tracerl.core.store",
    "Task": "tracerl.core.types",
    "TerminationReason": "tracerl.core.types",
    "TokenSequence": "tracerl.core.types",
    "ToolCall": "tracerl.core.types",
    "TracerlError": "tracerl.core.errors",
    "Trajectory": "tracerl.core.types",
    "TrajectoryGroup": "tracerl.core.types",
    "decode_otlp": "tracerl.core.spans",
    "app_run": "tracerl.core.record",
    "emit_reward": "tracerl.core.record",
    "episode_id": "tracerl.core.record",
    "instrument": "tracerl.adapters",
    "load_tasks": "tracerl.tasks.data",
    "reward": "tracerl.tasks.graders",
    "episode_from_spans": "tracerl.core.convert",
    "episodes_from_store": "tracerl.core.convert",
    "group_trajectories": "tracerl.core.types",
    "rollout": "tracerl.core.rollout_fn",
    "session": "tracerl.core.rollout",
    "set_task": "tracerl.core.record",
    "setup_tracing": "tracerl.core.otel",
    "tool_span": "tracerl.core.record",
    "uninstrument": "tracerl.adapters",
}

__all__ = [
    "ConfigError",
    "Episode",
    "EvalReport",
    "GatewayServer",
    "Message",
    "MissingDependencyError",
    "RolloutConfig",
    "RolloutContext",
    "RolloutError",
    "RolloutSettings",
    "SamplingParams",
    "Session",
    "SpanDecodeError",
    "SpanRecord",
    "SpanStore",
    "Step",
    "StoreError",
    "StoreExporter",
    "Task",
    "TerminationReason",
    "TokenSequence",
    "ToolCall",
    "TorchEngine",
    "TracerlError",
    "TrainConfig",
    "TrainResult",
    "Trajectory",
    "TrajectoryGroup",
    "UpstreamEngine",
    "app_run",
    "decode_otlp",
    "emit_reward",
    "episode_from_spans",
    "episode_id",
    "episodes_from_sessions",
    "episodes_from_store",
    "evaluate",
    "group_trajectories",
    "instrument",
    "load_tasks",
    "reward",
    "rollout",
    "session",
    "set_task",
    "setup_tracing",
    "tool_span",
    "train",
    "uninstrument",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracerl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # pragma: no cover
    from tracerl.adapters import instrument, uninstrument
    from tracerl.core.convert import episode_from_spans, episodes_from_sessions, episodes_from_store
    from tracerl.core.errors import (
        ConfigError,
        MissingDependencyError,
        RolloutError,
        SpanDecodeError,
        StoreError,
        TracerlError,
    )
    from tracerl.core.otel import setup_tracing
    from tracerl.core.record import app_run, emit_reward, episode_id, set_task, tool_span
    from tracerl.core.rollout import (
        RolloutConfig,
        RolloutContext,
        RolloutSettings,
        Session,
        session,
    )
    from tracerl.core.rollout_fn import rollout
    from tracerl.core.spans import SpanRecord, decode_otlp
    from tracerl.core.store import SpanStore, StoreExporter
    from tracerl.core.types import (
        Episode,
        Message,
        Step,
        Task,
        TerminationReason,
        TokenSequence,
        ToolCall,
        Trajectory,
        TrajectoryGroup,
        group_trajectories,
    )
    from tracerl.engines.base import SamplingParams
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.engines.upstream import UpstreamEngine
    from tracerl.gateway.server import GatewayServer
    from tracerl.tasks.data import load_tasks
    from tracerl.tasks.graders import reward
    from tracerl.trainers.config import TrainConfig
    from tracerl.trainers.evaluate import EvalReport, evaluate
    from tracerl.trainers.loop import TrainResult, train
