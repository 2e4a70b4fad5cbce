"""Evaluation: accuracy and pass@k of an agent on a task's held-out split.

The trainer's held-out accuracy and ``tracerl eval`` run this same code on the same tasks
(test split, seed 0, the first ``max_examples``) with the same per-rollout seeds, so the two
report the same number for the same weights.

pass@k uses the unbiased estimator of Chen et al. 2021 (https://arxiv.org/abs/2107.03374):
with n samples of which c are correct, pass@k = 1 - C(n - c, k) / C(n, k), averaged over
tasks; the interval is mean +- 1.96 standard errors over tasks.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracerl.core.grading import accuracy_rule, graded
from tracerl.core.otel import Tracing
from tracerl.core.rollout import RolloutSettings
from tracerl.core.types import Episode, Task

from .metrics import is_correct, judged_by_reward_max, timeout_advice, used_tools
from .rollouts import Agent, rollout_seed, run_rollouts

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0  # an episode's limit when neither `tracerl eval --timeout` nor its app sets one
EVAL_SEED = -1  # the rollout_seed "step" of evaluations, apart from every training step
# episodes that ended so say nothing about the policy: the agent (or its harness) broke
FAILED_REASONS = frozenset({"error", "timeout", "cancelled"})


def failed_episodes(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes that ended with an error, a timeout or a cancellation."""
    return [ep for ep in episodes if ep.termination_reason.value in FAILED_REASONS]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: n samples, c correct."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class EvalReport:
    """Per-task results and their summary. Accuracy, pass@k and the mean reward are over the
    graded episodes (:func:`~tracerl.core.grading.graded`); ``ungraded`` counts the others
    (nothing gave them a reward), and with none graded they are None: not measured, never 0."""

    episodes: list[Episode]
    n: int
    accuracy: float | None = None  # mean over tasks of the share of correct samples (= pass@1)
    accuracy_ci: float = 0.0  # half-width of the 95% interval
    pass_at: dict[int, tuple[float, float]] = field(default_factory=dict)  # k -> (value, half-width)
    reasons: dict[str, int] = field(default_factory=dict)
    reward_mean: float | None = None
    ungraded: int = 0  # episodes that ran and that nothing graded (no reward span, no reward function)
    tool_use: float | None = None  # share of episodes that called a tool; None when none was offered
    reward_max: float = 1.0  # the reward that counts as correct where the reward gave no is_correct
    judged_by_reward_max: int = 0  # episodes whose correctness came from that rule

    @property
    def accuracy_rule(self) -> str | None:
        """How accuracy was counted when not (only) by ``is_correct``, to print beside it."""
        return accuracy_rule(self.judged_by_reward_max, self.reward_max)

    @classmethod
    def from_episodes(cls, episodes: list[Episode], n: int, ks: Sequence[int] = (),
                      reward_max: float = 1.0) -> EvalReport:
        by_task: dict[str, list[Episode]] = {}
        judged = [ep for ep in episodes if graded(ep)]
        for ep in judged:
            by_task.setdefault(ep.task.id if ep.task else ep.id, []).append(ep)
        report = cls(episodes=episodes, n=n, reward_max=reward_max, ungraded=len(episodes) - len(judged),
                     judged_by_reward_max=judged_by_reward_max(episodes))
        report.reasons = dict(Counter(ep.termination_reason.value for ep in episodes))
        if any(s.tools for ep in episodes for s in ep.steps):
            report.tool_use = sum(map(used_tools, episodes)) / len(episodes)
        if not judged:
            return report
        report.reward_mean = statistics.fmean([ep.reward or 0.0 for ep in judged])
        correct = [sum(is_correct(ep, reward_max) for ep in eps) for eps in by_task.values()]
        counts = [len(eps) for eps in by_task.values()]
        report.accuracy, report.accuracy_ci = _mean_ci([c / m for c, m in zip(correct, counts)])
        for k in ks:  # a task with fewer than k graded samples has no pass@k of its own
            values = [pass_at_k(m, c, k) for c, m in zip(correct, counts) if m >= k]
            if values:
                report.pass_at[k] = _mean_ci(values)
        return report

    @property
    def graded_count(self) -> int:
        """Episodes with a verdict (see :func:`~tracerl.core.grading.graded`)."""
        return len(self.episodes) - self.ungraded

    def not_measured(self) -> str:
        """Why there is no accuracy, to print in its place (with none graded)."""
        return (f"not measured: none of its {len(self.episodes)} episodes has a reward (no reward span, no reward "
                "function): pass --reward NAME or module:fn, or return one from the agent")

    def step_metrics(self) -> dict[str, float]:
        """``eval/*`` of a training step's evaluation: accuracy and mean reward where measured,
        the count of ungraded episodes where there are any."""
        out = {"eval/judged_by_reward_max": float(self.judged_by_reward_max)}
        if self.accuracy is not None and self.reward_mean is not None:
            out |= {"eval/accuracy": self.accuracy, "eval/reward_mean": self.reward_mean}
        if self.ungraded:
            out["eval/ungraded"] = float(self.ungraded)
        return out


def _mean_ci(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def evaluate(
    agent: Agent,
    tasks: Sequence[Task],
    settings: RolloutSettings,
    *,
    tracing: Tracing,
    n: int = 1,
    ks: Sequence[int] = (),
    seed: int = 0,
    concurrency: int = 32,
    tag: str = "eval",
    reward: Any = None,
    reward_max: float = 1.0,
    kind: str = "eval",
) -> EvalReport:
    """Run ``n`` rollouts of every task (seeded by position), graded by ``reward`` when given,
    and summarise them. Their episode spans say ``kind``: ``eval`` (held-out tasks: nothing
    trains on them later), or ``train`` where the tasks evaluated are training tasks (a
    teacher's traces collected to train a student on)."""
    jobs = [
        (task, f"{tag}-t{i}-n{j}", settings.model_copy(update={"seed": rollout_seed(seed, EVAL_SEED, i, j)}))
        for i, task in enumerate(tasks) for j in range(n)
    ]
    start = time.perf_counter()
    episodes = run_rollouts(agent, jobs, tracing=tracing, concurrency=concurrency, reward=reward, kind=kind)
    advice = timeout_advice(episodes, time.perf_counter() - start, concurrency, settings.max_tokens,
                            settings.timeout_s or getattr(agent, "timeout_s", None))
    if advice:
        log.warning("evaluation: %s", advice)
    return EvalReport.from_episodes(episodes, n, ks, reward_max)


def run_eval_command(
    task: str, settings: RolloutSettings, *, agent: str | None, model: str | None, external: bool, n: int,
    ks: Sequence[int], concurrency: int, max_examples: int, split: str, seed: int, output: Path,
    litellm_model: str | None = None, data: Any = None, reward: str | None = None,
    reward_options: dict[str, Any] | None = None, reward_max: float = 1.0, continue_tokens: bool = True,
    store: str | None = None,
) -> EvalReport:
    """``tracerl eval``: serve ``model`` in-process unless ``external``, evaluate, save episodes.

    ``data`` (a :class:`~tracerl.tasks.data.DataConfig`) evaluates the user's own tasks
    instead of ``task``: their held-out split when the config names one, else all rows.
    ``reward`` grades what the agent returns (see ``TrainConfig.reward``). ``store``: a span store
    shared by runs (default ``$TRACERL_STORE``, else ``output/traces.db``); the evaluation's
    episodes carry a run id of their own, written to report.json.

    With ``litellm_model`` the in-process gateway forwards every call through LiteLLM to that
    model (``provider/model``, credentials from the provider's usual environment variables,
    ``settings.gateway_url`` as the API base when ``external``): any agent runs unchanged
    against a hosted model and every call is recorded (as text: hosted APIs return no token
    ids)."""
    from tracerl import tasks as registry
    from tracerl.core.otel import setup_tracing
    from tracerl.core.store import run_store, shared_store

    from .model_path import resolve_model
    from .rollouts import check_agent, load_agent, task_reward

    store = shared_store(store)
    if model is not None:  # before anything is written: a typo'd path is one line, not a traceback
        model = resolve_model(model)
    spec = registry.from_data(data) if data is not None else registry.get(task)
    fn = load_agent(agent or spec.default_agent)
    if settings.timeout_s is None and fn.timeout_s is None:  # neither the command nor the app set one
        settings = settings.model_copy(update={"timeout_s": DEFAULT_TIMEOUT_S})
    grader = task_reward(reward, reward_options or {}, spec)
    tasks, kind = _eval_tasks(spec, split, max_examples)
    check_agent(fn, tasks[:1])  # an app function whose inputs the tasks lack: one line, before anything runs
    # episode ids of their own: a second eval into the same folder adds to its traces.db, and the
    # same ids would merge two runs' spans into one episode each
    tag = f"eval-{uuid.uuid4().hex[:8]}"
    output.mkdir(parents=True, exist_ok=True)
    run_id = f"{output.name or 'eval'}-{tag}"
    spans = run_store(output, store=store, run_id=run_id)
    settings = settings.model_copy(update={"store": spans.path, "run_id": run_id})
    tracing = setup_tracing(use_store=False)  # the sessions name the store: it claims their spans
    tracing.store(spans)
    if external and not litellm_model:
        report = evaluate(fn, tasks, settings, tracing=tracing, n=n, ks=ks, seed=seed, concurrency=concurrency,
                          tag=tag, reward=grader, reward_max=reward_max, kind=kind)
    else:
        from tracerl.gateway.server import GatewayServer

        engine = _eval_engine(settings, model, litellm_model, external)
        try:
            with GatewayServer(engine, spans, continue_tokens=continue_tokens) as gateway:
                local = settings.model_copy(update={"gateway_url": gateway.url, "session_path": True,
                                                    "model": engine.model_name})
                report = evaluate(fn, tasks, local, tracing=tracing, n=n, ks=ks, seed=seed, concurrency=concurrency,
                                  tag=tag, reward=grader, reward_max=reward_max, kind=kind)
        finally:
            _close(engine)
    with open(output / "episodes.jsonl", "w") as fh:
        for ep in report.episodes:
            fh.write(ep.model_dump_json() + "\n")
    summary = {"task": spec.name, "n": n, "accuracy": report.accuracy, "accuracy_ci95": report.accuracy_ci,
               "accuracy_rule": report.accuracy_rule or "is_correct", "judged_by_reward_max": report.judged_by_reward_max,
               "pass_at_k": {str(k): {"value": v, "ci95": c} for k, (v, c) in report.pass_at.items()},
               "reward_mean": report.reward_mean, "ungraded": report.ungraded, "tool_use": report.tool_use,
               "termination_reasons": report.reasons,
               "run_id": run_id, "store": spans.where}
    (output / "report.json").write_text(json.dumps(summary, indent=2))
    return report


def _eval_tasks(spec: Any, split: str, n: int) -> tuple[list[Task], str]:
    """``n`` tasks of ``split`` (the user's own data without a held-out split: its rows), and
    the episode kind they make: ``eval`` for held-out tasks, ``train`` for training tasks."""
    from tracerl.tasks.data import UserTasks

    if isinstance(spec.source, UserTasks) and split == "test" and not spec.source.test:
        return spec.source.tasks("train", min(n, len(spec.source.train)), seed=0), "train"
    return list(spec.tasks(split, n, seed=0)), "train" if split == "train" else "eval"


def _eval_engine(settings: RolloutSettings, model: str | None, litellm_model: str | None, external: bool) -> Any:
    if litellm_model:
        from tracerl.engines.upstream import UpstreamEngine

        key = settings.api_key if settings.api_key != "tracerl" else None  # else LiteLLM reads the provider's env
        return UpstreamEngine(settings.gateway_url if external else "", litellm_model, provider="litellm",
                              api_key=key)
    from tracerl.engines.torch_engine import TorchEngine

    return TorchEngine(model, model_name=settings.model, max_batch_size=64)


def _close(engine: Any) -> None:
    if hasattr(engine, "shutdown"):
        engine.shutdown()
    else:  # UpstreamEngine: an async HTTP client, bound to the gateway's finished event loop
        import asyncio
        import contextlib

        with contextlib.suppress(RuntimeError, OSError):
            asyncio.run(engine.close())
