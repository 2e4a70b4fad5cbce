"""The training loop, top to bottom: rollouts -> episodes -> advantages -> update -> new weights.

    result = tracerl.trainers.train(TrainConfig(task="arithmetic", steps=40))

Per step: take ``batch_size`` tasks, run ``group_size`` rollouts of each through the user's
agent against the gateway (in this process, or in a child process when rollouts overlap
the update; it records every call's tokens into the run's span store), read the episodes
back from the spans, compute advantages per (task, agent) group, make one policy-gradient
update, and load the new weights into the engine with version + 1
(the gateway stamps later spans with it). A checkpoint after every ``save_every`` steps
makes a SIGKILL cost at most the step in flight.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError
from tracerl.core.otel import Tracing, setup_tracing
from tracerl.core.rollout import RolloutFunction, RolloutSettings
from tracerl.core.store import SpanStore
from tracerl.core.types import Episode, Task, Trajectory
from tracerl.engines.torch_engine import SMALL_MODEL_PARAMS

from . import checkpoint, lora
from .batching import make_batch
from .config import RFT, TrainConfig
from .evaluate import evaluate
from .metrics import MetricsLogger, episode_metrics
from .producer import Producer
from .progress import Progress
from .rft import load_traces, make_rft_batch, select, sft_rows
from .rollouts import load_agent, rollout_seed, run_rollouts
from .update import make_optimizer, policy_update, sft_update

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run achieved: held-out accuracy before and after, and the metrics of every step."""

    run_dir: Path
    accuracy_before: float | None
    accuracy_after: float | None
    history: list[dict[str, float]] = field(default_factory=list)
    final_checkpoint: Path | None = None


@dataclass
class _Run:
    """What the loop holds for one run (built by :func:`_setup`)."""

    cfg: TrainConfig
    agent: RolloutFunction
    base: str  # the model training started from
    model: Any
    tokenizer: Any
    ref_model: Any
    optimizer: Any
    scheduler: Any
    store: SpanStore
    tracing: Tracing
    train_tasks: list[Task]
    eval_tasks: list[Task]
    offline: list[Trajectory] = field(default_factory=list)  # from_traces: what passed the bar
    start_step: int = 0
    version: int = 0
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex[:8])


def train(cfg: TrainConfig, *, agent: RolloutFunction | None = None, tracing: Tracing | None = None,
          console: Any = None) -> TrainResult:
    """Run ``cfg`` (resuming from ``cfg.output`` when ``cfg.resume``); returns the result.

    ``agent`` overrides ``cfg.agent``; ``tracing`` replaces the global tracer provider's
    (framework adapters record on the global one, so pass it only for adapter-free agents).
    """
    run = _setup(cfg, agent, tracing)
    progress = Progress(cfg, console, start=run.start_step)
    logger = MetricsLogger(cfg.output, cfg)
    result = TrainResult(cfg.output, None, None)
    try:
        with _serving(run) as (gateway_url, engine):
            engine.update_weights(lora.merged_state_dict(run.model), run.version)  # resumed or adapted weights
            settings = cfg.rollout.model_copy(update={"gateway_url": gateway_url, "store": run.store.path})
            if run.start_step == 0 and cfg.eval_size:
                result.accuracy_before = _evaluate(run, settings, 0, logger, progress)
            producer = Producer(lambda step: _rollouts(run, settings, step), run.start_step, cfg.steps,
                                0 if cfg.from_traces else cfg.async_staleness)
            for step, episodes, rollout_s in _steps(run, producer):
                metrics = _offline_step(run, step) if cfg.from_traces else _train_step(run, episodes, rollout_s)
                _push_weights(run, engine)
                producer.updated(step)
                if cfg.eval_size and cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
                    metrics["eval/accuracy"] = _evaluate(run, settings, step + 1, None, progress)
                logger.log(step + 1, metrics)
                result.history.append({"step": step + 1, **metrics})
                progress.step(step + 1, metrics)
                if (cfg.save_every and (step + 1) % cfg.save_every == 0) or step + 1 == cfg.steps:
                    result.final_checkpoint = _save(run, step + 1)
            if cfg.eval_size:
                result.accuracy_after = _evaluate(run, settings, cfg.steps, logger, progress)
    finally:
        progress.close()
        logger.close()
        run.tracing.flush()
    return result


@contextlib.contextmanager
def _serving(run: _Run) -> Iterator[tuple[str, Any]]:
    """(gateway URL, engine handle with ``update_weights``): the gateway and TorchEngine in a
    child process when ``engine_process`` says so (by default when rollouts overlap the
    update), else in this one."""
    cfg = run.cfg
    child = cfg.engine_process if cfg.engine_process is not None else cfg.async_staleness > 0 and not cfg.from_traces
    if child:
        from tracerl.gateway.child import GatewayProcess

        with GatewayProcess(run.base, run.store.path, model_name=cfg.rollout.model, device=cfg.device,
                            max_batch_size=64, log_path=cfg.output / "gateway.log") as proc:
            yield proc.url, proc
        return
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.gateway.server import GatewayServer

    engine = TorchEngine(run.base, model_name=cfg.rollout.model, device=cfg.device, max_batch_size=64)
    try:
        with GatewayServer(engine, run.store) as gateway:
            yield gateway.url, engine
    finally:
        engine.shutdown()


def _setup(cfg: TrainConfig, agent: RolloutFunction | None, tracing: Tracing | None) -> _Run:
    if cfg.deterministic:
        # MKL picks kernels by memory alignment unless told not to; read when MKL first runs.
        os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from tracerl import tasks
    from tracerl.models import tiny_model_path

    if cfg.rollout.temperature <= 0:
        raise ConfigError("rollout.temperature must be > 0 to train (greedy samples have no usable logprobs)")
    hf_logging.disable_progress_bar()  # a bar per checkpoint write would drown the run's own
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    spec = tasks.get(cfg.task)
    agent = agent or load_agent(cfg.agent or spec.default_agent)
    base = str(cfg.model or tiny_model_path())
    if not cfg.resume and checkpoint.latest(cfg.output / "checkpoints") is not None:
        raise ConfigError(f"{cfg.output} holds a previous run's checkpoints; pass --resume to continue it, "
                          "or choose another --output (nothing there was changed)")
    found = checkpoint.latest(cfg.output / "checkpoints") if cfg.resume else None
    cfg.output.mkdir(parents=True, exist_ok=True)
    (cfg.output / "config.json").write_text(cfg.model_dump_json(indent=2))
    if cfg.resume and found is None:
        log.warning("--resume: no checkpoint in %s, starting from step 0", cfg.output)
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    adapter = found is not None and lora.is_adapter_checkpoint(found)
    model = AutoModelForCausalLM.from_pretrained(str(base if adapter or found is None else found),
                                                 dtype=torch.float32).to(device)
    if adapter:
        model = lora.load(model, found)
    elif cfg.lora is not None:
        model = lora.apply(model, cfg.lora)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if not cfg.threads and device == "cpu" and model.num_parameters() < SMALL_MODEL_PARAMS:
        # as in TorchEngine: more threads do not pay on tiny matrices, and with rollouts on the
        # same cores (async, or other processes) OpenMP's spinning barriers cost 10-20x
        torch.set_num_threads(1)
    ref_model = None
    if cfg.loss.kl_beta > 0:
        ref_model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).to(device).eval()
        ref_model.requires_grad_(False)
    optimizer, scheduler = make_optimizer(model, cfg, cfg.steps)
    store = SpanStore(str(cfg.output / "traces.db"))
    if tracing is not None:
        tracing = setup_tracing(store, tracer_provider=tracing.provider)
    run = _Run(
        cfg=cfg, agent=agent, base=base, model=model, tokenizer=tokenizer, ref_model=ref_model,
        optimizer=optimizer, scheduler=scheduler, store=store, tracing=tracing or setup_tracing(store),
        train_tasks=spec.tasks("train", cfg.steps * cfg.batch_size, seed=cfg.seed),
        eval_tasks=spec.tasks("test", cfg.eval_size, seed=0) if cfg.eval_size else [],
    )
    if cfg.from_traces is not None:
        assert isinstance(cfg.algo, RFT)
        episodes = load_traces(Path(cfg.from_traces), tokenizer)
        chosen = [traj for _, traj in select(episodes, cfg.algo, {r.value for r in cfg.exclude})]
        if not chosen:
            raise ConfigError(f"--from-traces {cfg.from_traces}: none of its {len(episodes)} episodes has a "
                              f"trajectory with reward >= {cfg.algo.min_reward}; lower --set algo.min_reward")
        random.Random(cfg.seed).shuffle(chosen)
        run.offline = chosen
        log.info("from traces: %d of %d episodes pass the bar", len(chosen), len(episodes))
    if found is not None:
        state = checkpoint.load_state(found)
        optimizer.load_state_dict(state["optimizer"])
        if state.get("scheduler") is not None:
            scheduler.load_state_dict(state["scheduler"])
        checkpoint.set_rng_state(state["rng"])
        run.start_step, run.version = int(state["step"]), int(state["weight_version"])
        log.info("resumed from %s (step %d)", found, run.start_step)
    return run


def _updater(cfg: TrainConfig) -> tuple[Any, Any]:
    """(make_batch, update) of the algorithm, chosen once."""
    if isinstance(cfg.algo, RFT):
        return make_rft_batch, sft_update
    return make_batch, policy_update


def _push_weights(run: _Run, engine: Any) -> None:
    # No copy needed: the engine copies the tensors into its own model (or a file) before
    # update_weights returns, and the update does not run meanwhile.
    run.version += 1
    engine.update_weights(lora.merged_state_dict(run.model), run.version)


def _offline_step(run: _Run, step: int) -> dict[str, float]:
    """RFT on recorded trajectories: the next ``batch_size`` of them, cycling in a seeded order."""
    cfg, n = run.cfg, len(run.offline)
    chosen = [run.offline[(step * cfg.batch_size + i) % n] for i in range(min(cfg.batch_size, n))]
    t0 = time.perf_counter()
    update = sft_update(run.model, run.optimizer, run.scheduler, sft_rows(chosen), cfg)
    return {**update, "time/update_s": time.perf_counter() - t0, "rft/offline_trajectories": float(n),
            "policy/weight_version": float(run.version + 1)}


def _steps(run: _Run, producer: Producer) -> Iterator[tuple[int, list[Episode], float]]:
    if run.cfg.from_traces:  # no rollouts: the data is the recorded traces
        yield from ((step, [], 0.0) for step in range(run.start_step, run.cfg.steps))
        return
    try:
        yield from producer
    finally:
        producer.close()


def _rollouts(run: _Run, settings: RolloutSettings, step: int) -> list[Episode]:
    """The episodes of training step ``step``: ``group_size`` rollouts of each of its tasks."""
    cfg = run.cfg
    tasks = run.train_tasks[step * cfg.batch_size:(step + 1) * cfg.batch_size]
    jobs = [
        (task, f"{run.nonce}-s{step}-t{i}-g{g}",
         settings.model_copy(update={"seed": rollout_seed(cfg.seed, step, i, g)}))
        for i, task in enumerate(tasks) for g in range(cfg.group_size)
    ]
    episodes = run_rollouts(run.agent, jobs, tracing=run.tracing, concurrency=cfg.concurrency)
    _warn_if_all_failed(episodes, step)
    return episodes


def _train_step(run: _Run, episodes: list[Episode], rollout_s: float) -> dict[str, float]:
    cfg = run.cfg
    t1 = time.perf_counter()
    build, update_fn = _updater(cfg)
    batch = build(episodes, cfg)
    update = update_fn(run.model, run.optimizer, run.scheduler, batch.rows, cfg,
                       ref_model=run.ref_model, temperature=cfg.rollout.temperature)
    t2 = time.perf_counter()
    metrics = {**episode_metrics(episodes), **batch.metrics, **update}
    metrics["time/rollout_s"] = rollout_s
    metrics["time/update_s"] = t2 - t1
    metrics["throughput/rollout_tokens_per_s"] = metrics.get("rollout/response_tokens", 0.0) / max(rollout_s, 1e-9)
    versions = [s.weight_version for ep in episodes for s in ep.steps if s.weight_version is not None]
    if versions:
        metrics["async/staleness_mean"] = run.version - sum(versions) / len(versions)
    metrics["throughput/update_tokens_per_s"] = update.get("update/tokens", 0.0) / max(t2 - t1, 1e-9)
    metrics["policy/weight_version"] = float(run.version + 1)
    return metrics


def _warn_if_all_failed(episodes: list[Episode], step: int) -> None:
    failed = [ep for ep in episodes if ep.termination_reason.value in ("error", "timeout", "cancelled")]
    if episodes and len(failed) == len(episodes):
        log.warning("step %d: every rollout failed (e.g. %s: %s); is the agent configured right?",
                    step + 1, failed[0].termination_reason.value, failed[0].error)


def _evaluate(run: _Run, settings: RolloutSettings, step: int, logger: MetricsLogger | None,
              progress: Progress) -> float:
    """Held-out accuracy of the current weights: exactly what ``tracerl eval`` computes."""
    cfg = run.cfg
    report = evaluate(run.agent, run.eval_tasks, settings.model_copy(update={"temperature": cfg.eval_temperature}),
                      tracing=run.tracing, seed=cfg.seed, concurrency=cfg.concurrency,
                      tag=f"{run.nonce}-eval{step}")
    if logger is not None:
        logger.log(step, episode_metrics(report.episodes, prefix="eval"))
    progress.evaluated(step, report.accuracy)
    return report.accuracy


def _save(run: _Run, step: int) -> Path:
    extra = {"weight_version": run.version, "data_position": step * run.cfg.batch_size}
    return checkpoint.save(run.cfg.output / "checkpoints", step, run.model, run.tokenizer, run.optimizer,
                           run.scheduler, extra, keep=run.cfg.keep_checkpoints)

