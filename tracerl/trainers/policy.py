"""The trained model, loaded once per run: the policy (full weights or LoRA adapters), its
tokenizer and the frozen reference for the KL term, in the run's precision and on its device,
resumed from a checkpoint when there is one."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracerl.engines.torch_engine import SMALL_MODEL_PARAMS

from . import lora, precision
from .config import TrainConfig

log = logging.getLogger(__name__)

# Activation checkpointing by default above this size: recomputing activations in the backward
# pass costs about a third more compute and saves most of their memory, which is what bounds
# the update of a billion-parameter model; below it the compute is the cost that shows.
CHECKPOINTING_PARAMS = 1_000_000_000


@dataclass
class Policy:
    model: Any
    tokenizer: Any
    ref_model: Any | None


def load_policy(cfg: TrainConfig, base: str, found: Path | None, device: str) -> Policy:
    """``base`` (or the checkpoint ``found``) as configured: precision, LoRA, checkpointing."""
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
    ref_model = None
    if cfg.loss.kl_beta > 0:
        ref_model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
        ref_model.to(device)  # type: ignore[arg-type]
        ref_model.eval().requires_grad_(False)
    return Policy(model=model, tokenizer=AutoTokenizer.from_pretrained(base), ref_model=ref_model)


def checkpointing(cfg: TrainConfig, model: Any) -> bool:
    """Whether to recompute activations in the backward pass: as set, else above 1B parameters."""
    if cfg.gradient_checkpointing is not None:
        return cfg.gradient_checkpointing
    return int(model.num_parameters()) > CHECKPOINTING_PARAMS
