"""The trained model, loaded once per run: the policy (full weights or LoRA adapters), its
tokenizer, optimizer and the frozen reference for the KL term, in the run's precision, on its
device and sharded across the run's processes, resumed from a checkpoint when there is one.

:class:`Policy` is also what the processes of a multi-GPU run share: rank 0 calls
``update``, ``weights`` and ``save``, and each of them first tells the other ranks to do the
same (see :mod:`tracerl.trainers.distributed`), which they do in :func:`follow`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracerl.engines.torch_engine import SMALL_MODEL_PARAMS

from . import checkpoint, distributed, lora, precision
from .batching import Row
from .config import RFT, TrainConfig
from .distributed import SINGLE, Group
from .update import make_optimizer, policy_update, sft_update

log = logging.getLogger(__name__)

# Activation checkpointing by default above this size: recomputing activations in the backward
# pass costs about a third more compute and saves most of their memory, which is what bounds
# the update of a billion-parameter model; below it the compute is the cost that shows.
CHECKPOINTING_PARAMS = 1_000_000_000


@dataclass
class Policy:
    cfg: TrainConfig
    model: Any
    tokenizer: Any
    ref_model: Any | None
    optimizer: Any = None
    scheduler: Any = None
    group: Group = SINGLE
    step: int = 0  # steps done: > 0 when resumed
    version: int = 0  # weight version of the checkpoint resumed from
    resumed_from: Path | None = None

    def update(self, rows: list[Row]) -> dict[str, float]:
        """One optimizer step on ``rows`` (on every rank, each on its share)."""
        self.group.tell("update", rows)
        fn = sft_update if isinstance(self.cfg.algo, RFT) else policy_update
        return fn(self.model, self.optimizer, self.scheduler, rows, self.cfg, ref_model=self.ref_model,
                  temperature=self.cfg.rollout.temperature, group=self.group)

    def weights(self) -> dict[str, Any]:
        """The full weights for the engine, adapters merged (rank 0's; ``{}`` on the others)."""
        self.group.tell("weights")
        if self.group.active:
            return distributed.full_state_dict(self.model)
        return lora.merged_state_dict(self.model)

    def save(self, root: Path, step: int, extra: dict[str, Any], keep: int) -> Path:
        """Checkpoint ``root/step-N``: HF-format weights (or adapters) and the trainer state."""
        self.group.tell("save", root, step, extra, keep)
        if not self.group.active:
            return checkpoint.save(root, step, self.model, self.tokenizer, self.optimizer, self.scheduler,
                                   extra, keep=keep)
        weights = distributed.full_state_dict(self.model)
        optimizer = distributed.full_optimizer_state(self.model, self.optimizer)
        path = root / f"step-{step:06d}"
        if self.group.main:
            checkpoint.save(root, step, self.model, self.tokenizer, self.optimizer, self.scheduler, extra,
                            keep=keep, state_dict=weights, optimizer_state=optimizer)
        return path


def follow(policy: Policy) -> None:
    """Ranks > 0: do what rank 0 says, until it stops."""
    for command, args in policy.group.commands():
        getattr(policy, command)(*args)


def load_policy(cfg: TrainConfig, base: str, found: Path | None, device: str, group: Group = SINGLE) -> Policy:
    """``base`` (or the checkpoint ``found``) as configured: precision, LoRA, checkpointing,
    sharding, the optimizer, and the trainer state of ``found``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter = found is not None and lora.is_adapter_checkpoint(found)
    dtype = precision.weights_dtype(cfg.precision)
    model: Any = AutoModelForCausalLM.from_pretrained(str(base if adapter or found is None else found), dtype=dtype)
    model.to(device)
    if found is not None and adapter:
        model = lora.load(model, found)
    elif cfg.lora is not None:
        model = lora.apply(model, cfg.lora)
    if checkpointing(cfg, model):
        # non-reentrant: works with frozen inputs (LoRA) and without use_cache. transformers 5.2x
        # renamed the method (the old name warns); older releases have only the old one.
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
        log.info("activation checkpointing on (%d parameters)", model.num_parameters())
    if not cfg.threads and device == "cpu" and model.num_parameters() < SMALL_MODEL_PARAMS:
        # as in TorchEngine: more threads do not pay on tiny matrices, and with rollouts on the
        # same cores (async, or other processes) OpenMP's spinning barriers cost 10-20x
        torch.set_num_threads(1)
    model = distributed.shard(model, group)  # before the optimizer: FSDP2 replaces the parameters
    ref_model = None
    if cfg.loss.kl_beta > 0:
        ref_model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
        ref_model.to(device)  # type: ignore[arg-type]
        ref_model = distributed.shard(ref_model.eval().requires_grad_(False), group)
    optimizer, scheduler = make_optimizer(model, cfg, cfg.steps)
    policy = Policy(cfg, model, AutoTokenizer.from_pretrained(base), ref_model, optimizer, scheduler, group)
    if found is not None:
        _resume(policy, found)
    return policy


def _resume(policy: Policy, found: Path) -> None:
    state = checkpoint.load_state(found)
    if policy.group.active:
        distributed.load_optimizer_state(policy.model, policy.optimizer, state["optimizer"])
    else:
        policy.optimizer.load_state_dict(state["optimizer"])
    if state.get("scheduler") is not None:
        policy.scheduler.load_state_dict(state["scheduler"])
    checkpoint.set_rng_state(state["rng"])
    policy.step, policy.version = int(state["step"]), int(state["weight_version"])
    policy.resumed_from = found


def checkpointing(cfg: TrainConfig, model: Any) -> bool:
    """Whether to recompute activations in the backward pass: as set, else above 1B parameters."""
    if cfg.gradient_checkpointing is not None:
        return cfg.gradient_checkpointing
    return int(model.num_parameters()) > CHECKPOINTING_PARAMS
