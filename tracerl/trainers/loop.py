"""The training loop, top to bottom: rollouts -> episodes -> advantages -> update -> new weights.

    result = tracerl.train(tracerl.TrainConfig(task="arithmetic", steps=40))

Per step: take ``batch_size`` tasks, run ``group_size`` rollouts of each through the user's
agent against the gateway (in this process, or in a child process when rollouts overlap
the update; it records every call's tokens into the run's span store), read the episodes
back from the spans, compute advantages per (task, agent) group, make one policy-gradient
update, and load the new weights into the engine with version + 1
(the gateway stamps later spans with it). A checkpoint after every ``save_every`` steps
makes a SIGKILL cost at most the step in flight.

Two ways a run ends early: Ctrl-C raises :class:`TrainingInterrupted` (a KeyboardInterrupt
that says how far the run got), and an agent whose every rollout failed for
``max_failed_steps`` steps in a row raises a RolloutError (training on nothing would only
write checkpoints of the untouched weights).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError, GradingError, RolloutError
from tracerl.core.grading import check_grading
from tracerl.core.otel import Tracing, setup_tracing
from tracerl.core.rollout import RolloutSettings
from tracerl.core.rollout_fn import RolloutFunction
from tracerl.core.store import SpanStore, run_store, shared_store
from tracerl.core.types import Episode, Task, TerminationReason, Trajectory
from tracerl.runs.folder import RunError, open_run

from . import checkpoint, distributed, precision, serving
from .attempt import Attempt
from .batching import make_batch
from .config import RFT, TrainConfig
from .evaluate import EvalReport, evaluate, failed_episodes
from .metrics import MetricsLogger, episode_metrics, memory_metrics, timeout_advice
from .model_path import resolve_model
from .policy import Policy, follow, load_policy
from .producer import Producer
from .progress import Progress
from .rft import (
    make_rft_batch,
    offline_episodes,
    recorded_heldout,
    select,
    sft_rows,
)
from .rollouts import Agent, check_agent, load_agent, rollout_seed, run_rollouts, task_reward

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run achieved: held-out accuracy (and mean reward) before and after, and the
    metrics of every step. ``accuracy_rule`` says how accuracy was counted when the reward
    gave no ``is_correct`` (None when it always did)."""

    run_dir: Path
    accuracy_before: float | None
    accuracy_after: float | None
    history: list[dict[str, float]] = field(default_factory=list)
    reward_before: float | None = None
    reward_after: float | None = None
    accuracy_rule: str | None = None
    final_checkpoint: Path | None = None
    start_step: int = 0  # > 0 when the run resumed
    resumed_from: Path | None = None  # the checkpoint it resumed from
    # "before"/"after" -> (episodes nothing graded, episodes) of that evaluation, where any was
    # ungraded: its accuracy is over the others, and None (not measured) when all were
    ungraded: dict[str, tuple[int, int]] = field(default_factory=dict)


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`train` after ``step`` completed steps; ``checkpoint`` is the newest
    one on disk (what ``resume`` continues from), None when there is none yet."""

    def __init__(self, step: int, checkpoint: Path | None):
        super().__init__(f"interrupted at step {step}")
        self.step, self.checkpoint = step, checkpoint


@dataclass
class _Run:
    """What the loop holds for one run (built by :func:`_inputs` and :func:`load_policy`)."""

    cfg: TrainConfig
    agent: Agent  # the rollout function, or Ray workers running it (--rollout-workers)
    base: str  # the model training started from
    store: SpanStore
    tracing: Tracing
    train_tasks: list[Task]
    eval_tasks: list[Task]
    policy: Policy = None  # type: ignore[assignment]  # set right after the inputs
    offline: list[Trajectory] = field(default_factory=list)  # from_traces: what passed the bar
    offline_counts: dict[str, float] = field(default_factory=dict)  # from_traces/*: what it kept, left out, dropped
    heldout_ids: set[str] = field(default_factory=set)  # every held-out task: never trained on
    ready: dict[str, Episode] = field(default_factory=dict)  # rolled out ahead of its step (the preflight)
    agent_spec: str = "module:fn"  # how to name the agent in a message (--agent ...)
    reward: Any = None  # the reward function grading what the agent returns (None: its own reward)
    failed_steps: int = 0  # consecutive steps whose every rollout failed
    warned_slow: bool = False  # a step's timeouts were explained once (metrics.timeout_advice)
    engine_counts: tuple[int, int, float] = (0, 0, 0.0)  # the engine's (batches, rows, busy s) so far
    version: int = 0
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex[:8])


def train(cfg: TrainConfig, *, agent: RolloutFunction | None = None, tracing: Tracing | None = None,
          console: Any = None) -> TrainResult:
    """Run ``cfg`` (resuming from ``cfg.output`` when ``cfg.resume``); returns the result.

    ``agent`` overrides ``cfg.agent``; ``tracing`` replaces the global tracer provider's
    (framework adapters record on the global one, so pass it only for adapter-free agents).
    The run starts once its preflight passes (:mod:`.attempt`): a failed preflight leaves no
    run folder, a started run that raises is recorded ``failed``.
    """
    group, device = distributed.init(cfg.device)
    cfg, base, found, device = _prepare(cfg, device, group)
    if not group.main:  # another rank of a multi-GPU run: a shard of the update, as rank 0 says
        follow(load_policy(cfg, base, found, device, group))
        return TrainResult(cfg.output, None, None)
    attempt = Attempt(cfg.output)
    run: _Run | None = None
    try:
        run = _inputs(cfg, agent, tracing, base)
        run.policy = policy = load_policy(cfg, base, found, device, group)
        run.version = policy.version
        if cfg.from_traces is not None:
            run.offline, run.offline_counts = _offline_trajectories(cfg, policy.tokenizer, run.heldout_ids)
        with serving.serve(cfg, base, run.store) as (gateway_url, engine), _rollout_workers(run, gateway_url):
            engine.update_weights(policy.weights(), run.version)  # resumed or adapted weights
            settings = cfg.rollout.model_copy(update={"gateway_url": gateway_url, "store": run.store.path,
                                                      "run_id": cfg.run_id, "replicas": cfg.gateways})
            if run.reward is not None and not cfg.from_traces:
                _preflight(run, settings)
            attempt.start(cfg, run.heldout_ids)
            result = _train_started(run, settings, engine, console)
    except KeyboardInterrupt:  # TrainingInterrupted once started
        attempt.end("interrupted")
        raise
    except Exception as exc:
        attempt.end("failed", f"{type(exc).__name__}: {exc}"[:500])
        raise
    finally:
        group.tell("stop")
        if run is not None:
            run.tracing.flush()
            if not attempt.started:  # closed before its file is removed
                run.tracing.release(run.store)
        attempt.abandon()
    # the last connection closing folds the WAL into traces.db: a finished run is one file, which
    # readers (the dashboard) open without touching anything beside it. Not after an interrupt:
    # rollouts still in flight would write to a closed store.
    run.tracing.release(run.store)
    attempt.end("finished")
    return result


def _train_started(run: _Run, settings: RolloutSettings, engine: Any, console: Any) -> TrainResult:
    """The run after its preflight: evaluate, train ``cfg.steps`` steps, evaluate again."""
    cfg, policy = run.cfg, run.policy
    progress = Progress(cfg, console, start=policy.step)
    logger = MetricsLogger(cfg.output, cfg)
    result = TrainResult(cfg.output, None, None, start_step=policy.step, resumed_from=policy.resumed_from)
    try:
        if policy.step == 0 and run.eval_tasks:
            _evaluated(result, _evaluate(run, settings, 0, logger, progress), "before")
        elif run.eval_tasks:  # measured by the run this one continues
            result.accuracy_before = _earlier_accuracy(cfg.output)
        _engine_mark(run, engine)
        producer = Producer(lambda step: _rollouts(run, settings, step), policy.step, cfg.steps,
                            0 if cfg.from_traces else cfg.async_staleness)
        for step, episodes, rollout_s in _steps(run, producer):
            serving.sleep(engine, cfg)  # a colocated vLLM frees the GPU for the update
            metrics = _offline_step(run, step) if cfg.from_traces else _train_step(run, episodes, rollout_s)
            metrics.update(_engine_batches(run, engine))
            if not isinstance(run.agent, RolloutFunction):  # episodes whose worker died or hung, nodes used
                metrics.update(run.agent.take_metrics())
            _push_weights(run, engine)
            producer.updated(step)
            if run.eval_tasks and cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
                report = _evaluate(run, settings, step + 1, None, progress)
                metrics.update(report.step_metrics())  # accuracy only where measured
                _engine_mark(run, engine)
            logger.log(step + 1, metrics)
            result.history.append({"step": step + 1, **metrics})
            progress.step(step + 1, metrics)
            # a step whose rollouts all failed updated on nothing: a resume should redo it
            all_failed = bool(episodes) and len(failed_episodes(episodes)) == len(episodes)
            if not all_failed and ((cfg.save_every and (step + 1) % cfg.save_every == 0) or step + 1 == cfg.steps):
                result.final_checkpoint = _save(run, step + 1)
        if run.eval_tasks:
            _evaluated(result, _evaluate(run, settings, cfg.steps, logger, progress), "after")
    except KeyboardInterrupt as exc:
        done = int(result.history[-1]["step"]) if result.history else policy.step
        raise TrainingInterrupted(done, checkpoint.latest(cfg.output / "checkpoints")) from exc
    finally:
        progress.close()
        logger.close()
    return result


@contextlib.contextmanager
def _rollout_workers(run: _Run, gateway_url: str) -> Iterator[None]:
    """--rollout-workers N: the run's rollouts (evaluations too) in Ray workers, not threads."""
    cfg = run.cfg
    if not cfg.rollout_workers:
        yield
        return
    if run.agent_spec == "module:fn":
        raise ConfigError("--rollout-workers: the workers import the agent, so name it as --agent module:fn or "
                          "path/file.py:fn rather than passing a function to train()")
    from .ray_rollouts import RayAgent

    local = run.agent
    workers = run.agent = RayAgent(run.agent_spec, cfg.rollout_workers, gateway_url=gateway_url, store=run.store,
                                   concurrency=cfg.concurrency, address=cfg.ray_address,
                                   timeout_s=cfg.rollout.timeout_s, connect_timeout_s=cfg.ray_connect_timeout_s)
    try:
        yield
    finally:
        run.agent = local
        workers.close()


def _earlier_accuracy(output: Path) -> float | None:
    """The before-training accuracy a resumed run's first part logged (metrics.jsonl, step 0)."""
    found = None
    with contextlib.suppress(OSError), open(output / "metrics.jsonl") as fh:
        for line in fh:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("step") == 0 and "eval/accuracy" in record:
                    found = float(record["eval/accuracy"])  # the last: a folder may hold restarts
    return found


def _prepare(cfg: TrainConfig, device: str | None, group: distributed.Group
             ) -> tuple[TrainConfig, str, Path | None, str]:
    """Check the config and seed torch (part of the preflight, :mod:`.attempt`); returns the
    config as run, the base model, the checkpoint to resume from and the device. Every rank
    runs it; it writes nothing."""
    if cfg.deterministic:
        # MKL picks kernels by memory alignment unless told not to; read when MKL first runs.
        os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
    import torch
    from transformers.utils import logging as hf_logging

    if cfg.rollout.temperature <= 0:
        raise ConfigError("rollout.temperature must be > 0 to train (greedy samples have no usable logprobs)")
    hf_logging.disable_progress_bar()  # a bar per checkpoint write would drown the run's own
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    base = resolve_model(cfg.model)
    if not cfg.resume and checkpoint.latest(cfg.output / "checkpoints") is not None:
        raise ConfigError(f"{cfg.output} holds a previous run's checkpoints; pass --resume to continue it, "
                          "or choose another --output (nothing there was changed)")
    found = checkpoint.latest(cfg.output / "checkpoints") if cfg.resume else None
    cfg = _identity(cfg)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    serving.check(cfg, device)
    cfg = cfg.model_copy(update={"precision": precision.resolve(cfg.precision, device)})  # recorded as run
    if group.main and cfg.resume and found is None:
        log.warning("--resume: no checkpoint in %s, starting from step 0", cfg.output)
    return cfg, base, found, device


def _identity(cfg: TrainConfig) -> TrainConfig:
    """The run's id and span store, recorded in config.json: a resumed run keeps both (its
    episodes in a shared store stay one run), a new one gets a fresh id."""
    before: dict[str, Any] = {}
    if cfg.resume:
        with contextlib.suppress(RunError):  # none yet, or unreadable: a fresh identity
            before = open_run(cfg.output).config
    store = shared_store(cfg.store, before.get("store"))
    run_id = cfg.run_id or before.get("run_id") or f"{cfg.output.name or 'run'}-{uuid.uuid4().hex[:8]}"
    return cfg.model_copy(update={"store": store, "run_id": run_id})


def _inputs(cfg: TrainConfig, agent: RolloutFunction | None, tracing: Tracing | None, base: str) -> _Run:
    """What rank 0 runs rollouts with: the agent, its tasks and reward, the run's span store."""
    from tracerl import tasks

    spec = tasks.from_data(cfg.data) if cfg.data is not None else tasks.get(cfg.task)
    agent_spec = cfg.agent or (spec.default_agent if agent is None else "module:fn")
    agent_given = agent is not None
    agent = agent or load_agent(agent_spec)
    reward = task_reward(cfg.reward, cfg.reward_options, spec)
    eval_spec = _eval_spec(cfg, spec)
    train_tasks = spec.tasks("train", cfg.steps * cfg.batch_size, seed=cfg.seed)
    eval_tasks = eval_spec.tasks("test", cfg.eval_size, seed=0) if cfg.eval_size else []
    check_agent(agent, (train_tasks or eval_tasks)[:1])  # an app function whose inputs the tasks lack: one line
    store = run_store(cfg.output, store=cfg.store, run_id=cfg.run_id)  # last: what can fail has
    # The run's sessions name its store, which claims their spans (every rollout's, the
    # adapters' included): none go to the app's shared store, and the run's holds nothing else.
    tracing = setup_tracing(use_store=False, tracer_provider=tracing.provider if tracing else None)
    tracing.store(store)
    run = _Run(cfg=cfg, agent=agent, base=base, store=store, tracing=tracing, train_tasks=train_tasks,
               eval_tasks=eval_tasks, agent_spec=agent_spec, reward=reward)
    if cfg.eval_size and not run.eval_tasks:
        log.warning("%s has no held-out tasks, so no accuracy is measured: pass --eval-data, --holdout or "
                    "--set data.split_column=COLUMN", spec.name)
    run.heldout_ids = _heldout_ids(spec, run.eval_tasks)  # heldout.json once the run starts
    skipped = evaluation_skipped(cfg, agent_given)
    if skipped is not None:  # still held out above: never trained on, only not evaluated
        log.warning("held-out accuracy %s", skipped)
        run.eval_tasks = []
    return run


def evaluation_skipped(cfg: TrainConfig, agent_given: bool = False) -> str | None:
    """Why a run evaluates nothing although ``eval_size`` asks for it (None: it evaluates).
    ``--from-traces`` without ``--agent``: the agent it would evaluate is the task's built-in
    one, not the app that made the traces, and with no reward its accuracy would be no number."""
    if cfg.from_traces is None or cfg.agent is not None or agent_given or not cfg.eval_size:
        return None
    return ("not measured: --from-traces without --agent evaluates nothing (the task's built-in agent is not the "
            "app that made the traces); to measure the app, pass its function and a reward: "
            "--agent app.py:run --reward NAME")


def _eval_spec(cfg: TrainConfig, spec: Any) -> Any:
    """The task whose test split the run evaluates on: ``eval_task``, else the task itself."""
    from tracerl import tasks

    if cfg.eval_task is None:
        return spec
    other = tasks.get(cfg.eval_task)
    if cfg.agent is None and other.default_agent != spec.default_agent:
        raise ConfigError(f"eval_task {other.name!r} is played by {other.default_agent}, {spec.name!r} by "
                          f"{spec.default_agent}; pass --agent to evaluate with the agent you train")
    return other


def _heldout_ids(spec: Any, eval_tasks: list[Task]) -> set[str]:
    """The ids of every held-out task: the user's whole held-out split (the run evaluates the
    first eval_size of it), else the tasks evaluated."""
    from tracerl.tasks.data import UserTasks

    test = spec.source.test if isinstance(spec.source, UserTasks) else eval_tasks
    return {t.id for t in test}


def _offline_trajectories(cfg: TrainConfig, tokenizer: Any, heldout: set[str]
                          ) -> tuple[list[Trajectory], dict[str, float]]:
    """from_traces: the recorded trajectories that pass the bar, in a seeded order, and the
    ``from_traces/*`` counts of what was left out, dropped and re-tokenized (printed here): none
    of an evaluation, and none of a task held out here or by the run that recorded them, by
    task id or by the question of its first user message (:mod:`.rft`)."""
    assert isinstance(cfg.algo, RFT)
    path = Path(str(cfg.from_traces))
    episodes, counts = offline_episodes(path, tokenizer, cfg.algo, heldout | recorded_heldout(path),
                                        _heldout_rows(cfg))
    excluded = {r.value for r in cfg.exclude}
    chosen = [traj for _, traj in select(episodes, cfg.algo, excluded)]
    counts.excluded = sum(ep.termination_reason.value in excluded for ep in episodes)
    counts.trajectories = len(chosen)
    for line in counts.lines(path, cfg.algo):
        log.warning("%s", line)
    if not episodes:  # all left out or dropped: the lines above say which way
        raise ConfigError(f"--from-traces {cfg.from_traces}: nothing left to train on (see the counts above): "
                          "every episode was held out, had no reward or no usable token ids")
    if not chosen:
        raise ConfigError(f"--from-traces {cfg.from_traces}: none of its {len(episodes)} trainable episodes has a "
                          f"trajectory with reward >= {cfg.algo.min_reward}; lower --set algo.min_reward")
    random.Random(cfg.seed).shuffle(chosen)
    return chosen, counts.metrics()


def _heldout_rows(cfg: TrainConfig) -> list[Task]:
    """The held-out tasks :func:`_heldout_ids` names (``--data``'s whole held-out split, else the
    tasks evaluated), whose questions key traces without a task id; read again, as the run
    keeps only their ids."""
    from tracerl import tasks
    from tracerl.tasks.data import load_data

    if cfg.data is not None:
        return load_data(cfg.data)[1]
    return _eval_spec(cfg, tasks.get(cfg.task)).tasks("test", cfg.eval_size, seed=0) if cfg.eval_size else []


def _engine_batches(run: _Run, engine: Any) -> dict[str, float]:
    """The engine's generation batches since the last step and their mean rows (an engine in
    this process that counts them, as TorchEngine does): few, full batches are what the
    engine is fast at; many small ones mean requests reached it spread out. ``engine/busy_s``:
    the seconds it spent generating, against the step's ``time/rollout_s``."""
    if not hasattr(engine, "batches") or not hasattr(engine, "rows"):
        return {}
    before = run.engine_counts
    _engine_mark(run, engine)
    batches, rows = run.engine_counts[0] - before[0], run.engine_counts[1] - before[1]
    return {"engine/batches": float(batches), "engine/rows_per_batch": rows / batches if batches else 0.0,
            "engine/busy_s": run.engine_counts[2] - before[2]}


def _engine_mark(run: _Run, engine: Any) -> None:
    """Count the engine's batches from here (an evaluation's are not a step's)."""
    run.engine_counts = (getattr(engine, "batches", 0), getattr(engine, "rows", 0), getattr(engine, "busy_s", 0.0))


def _push_weights(run: _Run, engine: Any) -> None:
    # No copy needed: the engine copies the tensors into its own model (or a file) before
    # update_weights returns, and the update does not run meanwhile.
    run.version += 1
    engine.update_weights(run.policy.weights(), run.version)


def _offline_step(run: _Run, step: int) -> dict[str, float]:
    """RFT on recorded trajectories: the next ``batch_size`` of them, cycling in a seeded order."""
    cfg, n = run.cfg, len(run.offline)
    chosen = [run.offline[(step * cfg.batch_size + i) % n] for i in range(min(cfg.batch_size, n))]
    t0 = time.perf_counter()
    update = run.policy.update(sft_rows(chosen))
    return {**update, "time/update_s": time.perf_counter() - t0, "rft/offline_trajectories": float(n),
            "rft/step_trajectories": float(len(chosen)), "policy/weight_version": float(run.version + 1),
            **run.offline_counts}


def _steps(run: _Run, producer: Producer) -> Iterator[tuple[int, list[Episode], float]]:
    if run.cfg.from_traces:  # no rollouts: the data is the recorded traces
        yield from ((step, [], 0.0) for step in range(run.policy.step, run.cfg.steps))
        return
    try:
        yield from producer
    finally:
        producer.close()


def _jobs(run: _Run, settings: RolloutSettings, step: int) -> list[tuple[Task, str, RolloutSettings]]:
    """Training step ``step``'s rollouts: ``group_size`` of each of its tasks, seeded by position."""
    cfg = run.cfg
    tasks = run.train_tasks[step * cfg.batch_size:(step + 1) * cfg.batch_size]
    return [
        (task, f"{run.nonce}-s{step}-t{i}-g{g}",
         settings.model_copy(update={"seed": rollout_seed(cfg.seed, step, i, g)}))
        for i, task in enumerate(tasks) for g in range(cfg.group_size)
    ]


def _rollouts(run: _Run, settings: RolloutSettings, step: int) -> list[Episode]:
    """The episodes of training step ``step`` (the one :func:`_preflight` ran already kept)."""
    cfg = run.cfg
    jobs = _jobs(run, settings, step)
    ready = run.ready.pop(jobs[0][1], None)
    start = time.perf_counter()
    episodes = run_rollouts(run.agent, jobs[1:] if ready else jobs, tracing=run.tracing,
                            concurrency=cfg.concurrency, reward=run.reward)
    episodes = [ready, *episodes] if ready else episodes
    _advise_timeouts(run, episodes, time.perf_counter() - start, step)  # before a step that fails stops the run
    _check_failures(run, episodes, step)
    check_grading(episodes, cfg.max_grading_errors, f"step {step + 1}")  # before the update that would use them
    return episodes


def _preflight(run: _Run, settings: RolloutSettings) -> None:
    """Grade one episode before anything else: a reward function that cannot run stops the run
    here, in seconds, not after an evaluation and a step spent on ungraded episodes. It is the
    first rollout of the first step, which keeps it."""
    job = _jobs(run, settings, run.policy.step)[0]
    (episode,) = run_rollouts(run.agent, [job], tracing=run.tracing, concurrency=1, reward=run.reward)
    if episode.termination_reason is TerminationReason.GRADING_ERROR:
        raise GradingError(
            f"the reward function failed on the first episode (task {job[0].id}, episode {episode.id}), before "
            f"any training: {(episode.error or '').strip().splitlines()[0][:300]}; try it alone with `tracerl eval "
            f"{_task_args(run.cfg)} --agent {run.agent_spec} --reward {run.cfg.reward or '...'} --max-examples 1`",
            episode_id=episode.id)
    run.ready[episode.id] = episode


def _train_step(run: _Run, episodes: list[Episode], rollout_s: float) -> dict[str, float]:
    cfg = run.cfg
    t1 = time.perf_counter()
    batch = (make_rft_batch if isinstance(cfg.algo, RFT) else make_batch)(episodes, cfg)
    update = run.policy.update(batch.rows)
    t2 = time.perf_counter()
    metrics = {**episode_metrics(episodes, reward_max=cfg.reward_max), **batch.metrics, **update}
    metrics["time/rollout_s"] = rollout_s
    metrics["time/update_s"] = t2 - t1
    metrics["throughput/rollout_tokens_per_s"] = metrics.get("rollout/response_tokens", 0.0) / max(rollout_s, 1e-9)
    versions = [s.weight_version for ep in episodes for s in ep.steps if s.weight_version is not None]
    if versions:
        metrics["async/staleness_mean"] = run.version - sum(versions) / len(versions)
        metrics["rollout/weight_versions"] = float(len(set(versions)))  # 1 unless rollouts overlap updates
    metrics["throughput/update_tokens_per_s"] = update.get("update/tokens", 0.0) / max(t2 - t1, 1e-9)
    metrics["policy/weight_version"] = float(run.version + 1)
    metrics.update(memory_metrics())
    return metrics


def _advise_timeouts(run: _Run, episodes: list[Episode], elapsed_s: float, step: int) -> None:
    """Once per run, the first step whose episodes timed out says how fast the engine was and
    what to change (a busy machine makes a slow engine, not a broken agent)."""
    cfg = run.cfg
    advice = timeout_advice(episodes, elapsed_s, cfg.concurrency, cfg.rollout.max_tokens,
                            cfg.rollout.timeout_s or getattr(run.agent, "timeout_s", None))
    if advice and not run.warned_slow:
        run.warned_slow = True
        log.warning("step %d: %s (said once per run)", step + 1, advice)


def _check_failures(run: _Run, episodes: list[Episode], step: int) -> None:
    """Warn when every rollout of a step failed; stop the run after ``max_failed_steps`` in a row."""
    failed = failed_episodes(episodes)
    if not episodes or len(failed) < len(episodes):
        run.failed_steps = 0
        return
    run.failed_steps += 1
    first = failed[0]
    error = (first.error or "").strip().splitlines()
    what = f"{first.termination_reason.value}: {error[0][:300] if error else 'no message'}"
    in_a_row = f" ({run.failed_steps} steps in a row)" if run.failed_steps > 1 else ""
    if run.failed_steps >= run.cfg.max_failed_steps:
        raise RolloutError(
            f"step {step + 1}: all {len(episodes)} rollouts failed{in_a_row}, the first with {what}; "
            f"check the agent: run `tracerl eval {_task_args(run.cfg)} --agent {run.agent_spec} --max-examples 1` "
            "to see one episode's error", episode_id=first.id)
    log.warning("step %d: all %d rollouts failed, the first with %s; is the agent configured right? "
                "(the run stops after %d such steps in a row)", step + 1, len(episodes), what,
                run.cfg.max_failed_steps)


def _task_args(cfg: TrainConfig) -> str:
    """How the command line names the run's tasks."""
    return f"--data {cfg.data.path}" if cfg.data is not None else cfg.task


def _evaluate(run: _Run, settings: RolloutSettings, step: int, logger: MetricsLogger | None,
              progress: Progress) -> EvalReport:
    """Held-out accuracy of the current weights: exactly what ``tracerl eval`` computes."""
    cfg = run.cfg
    report = evaluate(run.agent, run.eval_tasks, settings.model_copy(update={"temperature": cfg.eval_temperature}),
                      tracing=run.tracing, seed=cfg.seed, concurrency=cfg.concurrency,
                      tag=f"{run.nonce}-eval{step}", reward=run.reward, reward_max=cfg.reward_max)
    check_grading(report.episodes, cfg.max_grading_errors,
                  "the held-out evaluation " + ("before training" if step == 0 else f"after step {step}"))
    if logger is not None:
        logger.log(step, episode_metrics(report.episodes, prefix="eval", reward_max=cfg.reward_max))
    progress.evaluated(step, report)
    return report


def _evaluated(result: TrainResult, report: EvalReport, when: str) -> None:
    if when == "before":
        result.accuracy_before, result.reward_before = report.accuracy, report.reward_mean
    else:
        result.accuracy_after, result.reward_after = report.accuracy, report.reward_mean
    if report.ungraded:
        result.ungraded[when] = (report.ungraded, len(report.episodes))
    result.accuracy_rule = result.accuracy_rule or report.accuracy_rule


def _save(run: _Run, step: int) -> Path:
    extra = {"weight_version": run.version, "data_position": step * run.cfg.batch_size}
    return run.policy.save(run.cfg.output / "checkpoints", step, extra, run.cfg.keep_checkpoints)

