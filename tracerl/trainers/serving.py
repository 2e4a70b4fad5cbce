"""Which engine serves a run's rollouts, behind the run's gateway (``TrainConfig.engine``).

* ``torch`` (default): TorchEngine, in this process or, when rollouts overlap the update, in a
  child process with its own interpreter (:class:`~tracerl.gateway.child.GatewayProcess`).
* ``vllm``: vLLM in this process, colocated on the trainer's GPU. Rollouts wait for the
  update, so vLLM sleeps through it (its KV cache freed, its weights dropped) and wakes for
  the new weights: the update gets the GPU memory vLLM was holding.
* ``openai``: an OpenAI-compatible server that returns token ids and logprobs, run by the
  user (``vllm serve``, see docs/gpu.md); new weights reach it through vLLM's weight-update
  HTTP routes (:class:`~tracerl.engines.upstream.UpstreamEngine`).
* ``gateways`` (``--gateway URL ...``): no engine here; running gateways serve the rollouts
  and take each step's weights (:mod:`.replicas`).

:func:`check` turns impossible combinations into one line before any model is loaded.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError
from tracerl.core.store import SpanStore

from . import precision
from .config import TrainConfig

__all__ = ["check", "serve", "sleep"]


def check(cfg: TrainConfig, device: str) -> None:
    """Raise ConfigError for an engine this run cannot have."""
    if cfg.gateways:
        _check_replicas(cfg)
        return
    if cfg.engine == "torch":
        return
    if cfg.engine_process:
        raise ConfigError(f"engine_process runs TorchEngine in a child process; engine={cfg.engine} serves "
                          "from its own process already: drop --set engine_process=true")
    if cfg.engine == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise ConfigError("engine=vllm needs vLLM, which is not installed here: pip install 'tracerl[gpu]' "
                              "(in an environment whose torch is the one vLLM pins), or use --engine torch")
        from importlib.metadata import version

        from tracerl.engines.vllm_engine import check_version

        check_version(version("vllm"))  # read off its metadata: importing vLLM takes seconds
        if not device.startswith("cuda"):
            raise ConfigError(f"engine=vllm needs a CUDA GPU and this run's device is {device}; "
                              "use --engine torch on CPUs")
    if cfg.engine == "openai" and not cfg.upstream.url:
        raise ConfigError("engine=openai serves rollouts from your server: pass its base URL with "
                          "--set upstream.url=http://127.0.0.1:8000/v1 (a `vllm serve` process, see docs/gpu.md)")


def _check_replicas(cfg: TrainConfig) -> None:
    if cfg.engine != "torch" or cfg.engine_process:
        raise ConfigError("--gateway: the gateways serve the rollouts with their own engines, so the run has "
                          "none of its own; drop --engine / engine_process (start each gateway with its engine)")
    if cfg.async_staleness:
        raise ConfigError("--gateway with async_staleness > 0: every gateway takes each step's weights before the "
                          "next step's rollouts (one weight version per step); set async_staleness=0")
    if cfg.from_traces:
        raise ConfigError("--gateway with --from-traces: training on recorded traces makes no rollouts to serve")


@contextlib.contextmanager
def serve(cfg: TrainConfig, base: str, store: SpanStore) -> Iterator[tuple[str, Any]]:
    """(gateway URL, engine with ``update_weights``) for the run's rollouts, closed after."""
    if cfg.gateways:
        from .replicas import Replicas

        replicas = Replicas(cfg.gateways, api_key=cfg.rollout.api_key, store=store, model=cfg.rollout.model)
        replicas.check()
        yield replicas.urls[0], replicas
        return
    if cfg.engine == "torch" and _child(cfg):
        from tracerl.gateway.child import GatewayProcess

        with GatewayProcess(base, store.path, model_name=cfg.rollout.model, device=cfg.device,
                            dtype=precision.engine_dtype(cfg.precision), max_batch_size=64,
                            log_path=Path(cfg.output) / "gateway.log") as proc:
            yield proc.url, proc
        return
    engine = _engine(cfg, base)
    from tracerl.gateway.server import GatewayServer

    try:
        with GatewayServer(engine, store) as gateway:
            yield gateway.url, engine
    finally:
        _close(engine)


def sleep(engine: Any, cfg: TrainConfig) -> None:
    """Before an update: let a colocated vLLM give its GPU memory to the update (it wakes in
    ``update_weights``). Only when no rollout runs meanwhile (``async_staleness`` 0)."""
    if cfg.engine == "vllm" and cfg.vllm.sleep and cfg.async_staleness == 0 and hasattr(engine, "sleep"):
        engine.sleep()


def _child(cfg: TrainConfig) -> bool:
    if cfg.engine_process is not None:
        return cfg.engine_process
    return cfg.async_staleness > 0 and not cfg.from_traces


def _engine(cfg: TrainConfig, base: str) -> Any:
    if cfg.engine == "vllm":
        from tracerl.engines.vllm_engine import VLLMEngine

        v = cfg.vllm
        return VLLMEngine(base, model_name=cfg.rollout.model, gpu_memory_utilization=v.gpu_memory_utilization,
                          max_model_len=v.max_model_len, seed=cfg.seed, enforce_eager=v.enforce_eager,
                          enable_sleep_mode=v.sleep, dtype=precision.engine_dtype(cfg.precision))
    if cfg.engine == "openai":
        from tracerl.engines.upstream import UpstreamEngine, api_key_from_env

        u = cfg.upstream
        key = api_key_from_env(u.api_key_env, "upstream.api_key_env")
        return UpstreamEngine(u.url or "", u.model or base, api_key=key, tokenizer=base,
                              model_name=cfg.rollout.model, weight_sync=u.weight_sync,
                              weights_dir=str(Path(cfg.output) / "engine-weights"),
                              weights_dtype=precision.engine_dtype(cfg.precision))
    from tracerl.engines.torch_engine import TorchEngine

    return TorchEngine(base, model_name=cfg.rollout.model, device=cfg.device,
                       dtype=precision.engine_dtype(cfg.precision), max_batch_size=64)


def _close(engine: Any) -> None:
    shutdown = getattr(engine, "shutdown", None)
    if shutdown is not None:
        shutdown()
        return
    import asyncio

    with contextlib.suppress(Exception):  # a closing engine has nothing left to lose
        asyncio.run(engine.close())
