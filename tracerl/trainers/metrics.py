"""Where metrics go: always ``metrics.jsonl`` in the run folder; TensorBoard when installed;
W&B and MLflow when configured. Names are namespaced (``rollout/reward_mean``, ``loss/policy``).
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracerl.core.errors import require
from tracerl.core.grading import graded
from tracerl.core.types import Episode, Step, TerminationReason

from .batching import trajectory_reward
from .config import TrainConfig

log = logging.getLogger(__name__)


def episode_metrics(episodes: Sequence[Episode], prefix: str = "rollout", reward_max: float = 1.0) -> dict[str, float]:
    """Reward, accuracy, lengths, token-id health and termination reasons of a set of episodes.

    ``{prefix}/judged_by_reward_max`` counts the episodes whose correctness came from the
    ``reward_max`` rule (their reward gave no ``is_correct``; see :func:`is_correct`).
    Reward and accuracy are over the graded episodes (:func:`~tracerl.core.grading.graded`);
    ``{prefix}/ungraded`` counts the others, and with none graded the reward and accuracy
    keys are left out: not measured, never 0."""
    if not episodes:
        return {}
    judged = [ep for ep in episodes if graded(ep)]
    rewards = [float(ep.reward) if ep.reward is not None else 0.0 for ep in judged]
    steps = [s for ep in episodes for s in ep.steps]
    lengths = [len(s.response_ids) for s in steps if s.response_ids is not None]
    out: dict[str, float] = {}
    if judged:
        out[f"{prefix}/reward_mean"] = statistics.fmean(rewards)
        out[f"{prefix}/reward_std"] = statistics.pstdev(rewards)
        out[f"{prefix}/accuracy"] = sum(is_correct(ep, reward_max) for ep in judged) / len(judged)
    if len(judged) < len(episodes):
        out[f"{prefix}/ungraded"] = float(len(episodes) - len(judged))
    out |= {
        f"{prefix}/judged_by_reward_max": float(judged_by_reward_max(episodes)),
        f"{prefix}/episodes": float(len(episodes)),
        f"{prefix}/llm_calls_mean": len(steps) / len(episodes),
        f"{prefix}/response_length_mean": statistics.fmean(lengths) if lengths else 0.0,
        f"{prefix}/missing_token_ids": float(sum(1 for s in steps if not s.has_tokens)),
        f"{prefix}/prefix_breaks": float(sum(t.prefix_breaks for ep in episodes for t in ep.trajectories)),
        # training rows: one per chain (a context; several with sub-agents or compaction)
        f"{prefix}/chains_per_episode": sum(len(t.sequences) for ep in episodes for t in ep.trajectories)
        / len(episodes),
        f"{prefix}/fresh_contexts": float(sum(s.start == "fresh" for ep in episodes for t in ep.trajectories
                                              for s in t.sequences)),
        f"{prefix}/response_tokens": float(sum(lengths)),
    }
    if any(s.tools for s in steps):  # the share of episodes that called a tool, where one was offered
        out[f"{prefix}/tool_use"] = sum(map(used_tools, episodes)) / len(episodes)
        out[f"{prefix}/unoffered_tool_calls"] = float(sum(map(unoffered_calls, steps)))
    for reason, count in Counter(ep.termination_reason.value for ep in episodes).items():
        out[f"{prefix}/termination/{reason}"] = float(count)
    out.update(agent_rewards(episodes, prefix))
    return out


def agent_rewards(episodes: Sequence[Episode], prefix: str) -> dict[str, float]:
    """``{prefix}/reward_mean/AGENT`` per agent, where episodes hold more than one: each agent's
    own reward (a judge's), else the episode's, as the trainer scores it."""
    by_agent: dict[str, list[float]] = {}
    for ep in episodes:
        for traj in ep.trajectories:
            by_agent.setdefault(traj.name, []).append(trajectory_reward(ep, traj))
    if len(by_agent) < 2:
        return {}
    return {f"{prefix}/reward_mean/{name}": statistics.fmean(values) for name, values in sorted(by_agent.items())}


def used_tools(ep: Episode) -> bool:
    """The model asked for a tool call in at least one of the episode's LLM calls."""
    return any(s.output_message is not None and s.output_message.tool_calls for s in ep.steps)


def unoffered_calls(step: Step) -> int:
    """The step's tool calls to tools it was not offered (an invented name): the gateway passes
    them on as calls, which the app answers with an error (see gateway.protocol.parse_tool_calls)."""
    if step.output_message is None or not step.output_message.tool_calls:
        return 0
    offered = {(t.get("function") or t).get("name") for t in step.tools}
    return sum(1 for call in step.output_message.tool_calls if call.name not in offered)


def is_correct(ep: Episode, reward_max: float = 1.0) -> bool:
    """Correct as the reward said (``is_correct``: the built-in graders and tasks always say),
    else when its reward reached ``reward_max``, the declared best reward. Never "reward > 0":
    partial credit for a wrong answer (0.1 for calling the tool) is not a right answer."""
    if ep.is_correct is not None:
        return bool(ep.is_correct)
    return ep.reward is not None and ep.reward >= reward_max - 1e-9


def judged_by_reward_max(episodes: Sequence[Episode]) -> int:
    """Episodes graded without ``is_correct``, whose correctness :func:`is_correct` read off the
    reward (episodes without any reward are wrong either way)."""
    return sum(1 for ep in episodes if ep.is_correct is None and ep.reward is not None)


def accuracy(episodes: Sequence[Episode], reward_max: float = 1.0) -> float | None:
    """Share of correct episodes among the graded ones (see :func:`is_correct`); None when
    none was graded (not measured)."""
    judged = [ep for ep in episodes if graded(ep)]
    return sum(is_correct(ep, reward_max) for ep in judged) / len(judged) if judged else None



def timeout_advice(episodes: Sequence[Episode], elapsed_s: float, concurrency: int, max_tokens: int | None,
                   timeout_s: float | None) -> str | None:
    """What to change when some of a step's episodes ran out of time (None when none did): the
    engine's measured rate, response tokens per second of the step's wall time, and the three
    settings that trade the load on it against the time an episode gets (issue 42: on a busy
    machine a slow engine must read as slow, with its fix, not as broken agents)."""
    late = sum(ep.termination_reason is TerminationReason.TIMEOUT for ep in episodes)
    if not late:
        return None
    tokens = sum(len(s.response_ids) for ep in episodes for s in ep.steps if s.response_ids is not None)
    limit = f"{timeout_s:g}" if timeout_s else "unset"
    return (f"{late} of {len(episodes)} episodes timed out: the engine answered {tokens / max(elapsed_s, 1e-9):.1f} "
            f"tokens/s ({tokens} response tokens in {elapsed_s:.1f} s), too slow to finish them in time; lower "
            f"`concurrency` ({concurrency}) or `max_tokens` ({max_tokens or 'unset'}), or raise `timeout_s` ({limit})")


class MetricsLogger:
    """One call per step: ``logger.log(step, metrics)``; ``close()`` at the end.

    ``metrics.jsonl`` always; TensorBoard, W&B, MLflow and Trackio as configured. A backend that fails
    is logged and skipped: metrics must never stop training."""

    def __init__(self, run_dir: Path, cfg: TrainConfig):
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / "metrics.jsonl"
        self._file = open(self.path, "a", buffering=1)  # noqa: SIM115 - closed in close()
        self._sinks: list[_Sink] = []
        if cfg.tensorboard:
            self._sinks += _tensorboard(run_dir / "tensorboard")
        if cfg.wandb_project:
            self._sinks.append(_wandb(cfg))
        if cfg.mlflow_experiment:
            self._sinks.append(_mlflow(cfg))
        if cfg.trackio_project:
            self._sinks.append(_trackio(cfg))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        self._file.write(json.dumps({"step": step, "time": time.time(), **clean}, sort_keys=True) + "\n")
        for sink in self._sinks:
            try:
                sink.log(step, clean)
            except Exception as exc:  # noqa: BLE001 - a metrics backend must not stop training
                log.warning("metrics backend failed: %s", exc)

    def close(self) -> None:
        """Flush and finish every backend (a W&B or MLflow run left open shows as still running)."""
        self._file.close()
        for sink in self._sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001
                log.warning("metrics backend failed to close: %s", exc)
        self._sinks = []


@dataclass
class _Sink:
    log: Callable[[int, dict[str, float]], Any]
    close: Callable[[], Any]


def _tensorboard(path: Path) -> list[_Sink]:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return []
    writer = SummaryWriter(str(path))

    def log_step(step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            writer.add_scalar(key, value, step)
        writer.flush()

    return [_Sink(log_step, writer.close)]


def _wandb(cfg: TrainConfig) -> _Sink:
    wandb = require("wandb", "wandb", "wandb", "wandb_project")
    run = wandb.init(project=cfg.wandb_project, config=cfg.model_dump(mode="json"))
    return _Sink(lambda step, m: run.log(m, step=step), run.finish)


def _mlflow(cfg: TrainConfig) -> _Sink:
    mlflow = require("mlflow", "mlflow", "mlflow", "mlflow_experiment")
    mlflow.set_experiment(cfg.mlflow_experiment)
    run = mlflow.start_run(run_name=cfg.output.name)
    mlflow.log_params({"task": cfg.task, "algo": cfg.algo.type, "steps": cfg.steps, "seed": cfg.seed})
    # MLflow takes "/" in metric names: the same names as metrics.jsonl and TensorBoard
    return _Sink(lambda step, m: mlflow.log_metrics(m, step=step, run_id=run.info.run_id),
                 lambda: mlflow.end_run())


def _trackio(cfg: TrainConfig) -> _Sink:
    trackio = require("trackio", "trackio", "trackio", "trackio_project")
    # no CPU sampling thread: memory/* already comes from the trainer, once a step
    run = trackio.init(project=str(cfg.trackio_project), name=cfg.output.name, config=cfg.model_dump(mode="json"),
                       auto_log_cpu=False, auto_log_gpu=False)
    return _Sink(lambda step, m: run.log(m, step=step), run.finish)


def memory_metrics() -> dict[str, float]:
    """Peak memory so far: the process's resident set (the trainer, and the engine when it
    runs in process) and, on CUDA, the largest allocation of the device's tensors."""
    import resource
    import sys

    import torch

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    out = {"memory/peak_rss_gb": peak / (2**30 if sys.platform == "darwin" else 2**20)}
    if torch.cuda.is_available():
        out["memory/cuda_peak_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return out
