"""One policy update: micro-batches, gradient accumulation, clipping, an optimizer step.

The loss of the whole rollout batch is the sum of its micro-batches' losses, each divided
by the batch-wide normaliser (masked tokens, or sequences), so accumulation gives the
gradient of one big batch exactly, however the rows were packed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .batching import Row, micro_batches
from .config import TrainConfig
from .distributed import SINGLE, Group
from .losses import entropy, loss_normalizer, policy_loss, sft_loss, token_logprobs
from .precision import Precision, autocast


def _pad(rows: Sequence[Row], device: Any) -> dict[str, torch.Tensor]:
    """Right-padded tensors [B, T] of one micro-batch."""
    width = max(len(r) for r in rows)

    def tensor(values: list[list[Any]], dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([v + [0] * (width - len(v)) for v in values], dtype=dtype, device=device)

    out = {
        "input_ids": tensor([r.input_ids for r in rows], torch.long),
        "targets": tensor([r.targets for r in rows], torch.long),
        "mask": tensor([r.mask for r in rows], torch.float32),
        "advantages": tensor([r.advantages for r in rows], torch.float32),
        "attention": tensor([[1] * len(r) for r in rows], torch.long),
    }
    if all(r.engine_logprobs is not None for r in rows):
        out["engine_logprobs"] = tensor([r.engine_logprobs for r in rows], torch.float32)  # type: ignore[misc]
    return out


def token_budget(model: Any, cfg: TrainConfig) -> int:
    """Tokens per micro-batch: ``micro_batch_tokens``, fewer where the vocabulary is large."""
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    cap = cfg.optim.micro_batch_logits
    if cap is None:  # GPUs have the memory for bigger micro-batches, and need them to be busy
        cap = 2**29 if next(model.parameters()).device.type == "cuda" else 2**26
    by_logits = cap // vocab if vocab else cfg.optim.micro_batch_tokens
    return max(64, min(cfg.optim.micro_batch_tokens, by_logits))


def _local_batches(model: Any, rows: Sequence[Row], cfg: TrainConfig, group: Group, agg: str
                   ) -> tuple[list[dict[str, torch.Tensor]], int, float, float]:
    """(this rank's padded micro-batches, how many hold rows, the whole batch's loss
    normaliser, its masked tokens). Under FSDP every rank runs as many micro-batches (each
    forward is a collective), so a rank with fewer gets fillers: a row with mask 0, which adds
    nothing to the loss or the gradient."""
    device = next(model.parameters()).device
    batches = [_pad(mb, device) for mb in micro_batches(group.share(rows), token_budget(model, cfg))]
    real = len(batches)
    for _ in range(group.max(real) - real):
        filler = _pad([rows[0]], device)
        filler["mask"].zero_()
        filler["advantages"].zero_()
        batches.append(filler)
    norm = loss_normalizer(agg, [torch.tensor([r.mask], dtype=torch.float32) for r in rows])
    return batches, real, norm, max(1.0, float(sum(sum(r.mask) for r in rows)))


def _forward_logprobs(model: Any, mb: dict[str, torch.Tensor], temperature: float,
                      precision: Precision | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    ids = mb["input_ids"]
    with autocast(precision, ids.device.type):
        logits = model(input_ids=ids, attention_mask=mb["attention"]).logits  # [B, T, V]
    return token_logprobs(logits, mb["targets"], temperature=temperature), logits


def policy_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rows: Sequence[Row],
    cfg: TrainConfig,
    *,
    ref_model: Any = None,
    temperature: float = 1.0,
    group: Group = SINGLE,
) -> dict[str, float]:
    """``cfg.optim.epochs`` passes of one optimizer step each over ``rows``; returns metrics.
    Under FSDP (``group``) every rank is given all of ``rows`` and trains on its share."""
    if not rows:
        return {}
    batches, real, norm, masked = _local_batches(model, rows, cfg, group, cfg.loss.agg)
    model.train()
    with torch.no_grad():  # the policy that the ratio is taken against, and the reference
        for mb in batches:
            if cfg.optim.epochs > 1:  # else the ratio is taken against the logprobs of this very pass
                mb["old_logprobs"] = _forward_logprobs(model, mb, temperature, cfg.precision)[0]
            if ref_model is not None and cfg.loss.kl_beta > 0:
                mb["ref_logprobs"] = _forward_logprobs(ref_model, mb, temperature, cfg.precision)[0]
    sums: dict[str, float] = {}
    maxima: dict[str, float] = {}
    grad_norm = 0.0
    for _epoch in range(cfg.optim.epochs):
        for i, mb in enumerate(batches):
            logprobs, logits = _forward_logprobs(model, mb, temperature, cfg.precision)
            old = mb["old_logprobs"] if "old_logprobs" in mb else logprobs.detach()
            loss, metrics = policy_loss(
                logprobs, old, mb["advantages"], mb["mask"],
                eps_low=cfg.loss.eps_low, eps_high=cfg.loss.eps_high, agg=cfg.loss.agg,
                max_tokens=cfg.rollout.max_tokens, ref_logprobs=mb.get("ref_logprobs"),
                kl_beta=cfg.loss.kl_beta, engine_logprobs=mb.get("engine_logprobs"),
                tis_cap=cfg.loss.tis_cap, normalizer=norm,
            )
            loss.backward()
            if i >= real:  # a filler: no tokens to report on
                continue
            weight = float(mb["mask"].sum()) / masked  # token-mean metrics, weighted by tokens
            metrics["stats/entropy"] = entropy(logits.detach(), mb["mask"])
            for key, value in metrics.items():
                # the losses are already shares of the batch loss; maxima combine as maxima; the
                # rest are token means
                if key.endswith("_max"):
                    maxima[key] = max(maxima.get(key, value), value)
                    continue
                share = key in ("loss/policy", "loss/total")
                sums[key] = sums.get(key, 0.0) + (value if share else value * weight)
        grad_norm += _step(model, optimizer, scheduler, cfg)  # the same on every rank
    sums, maxima = group.combine(sums, maxima)
    epochs = cfg.optim.epochs
    out = {**{k: v / epochs for k, v in sums.items()}, **maxima, "stats/grad_norm": grad_norm / epochs}
    out["update/sequences"] = float(len(rows))
    out["update/tokens"] = float(sum(len(r) for r in rows))
    out["update/micro_batches"] = group.sum([float(real)])[0]
    out["optim/lr"] = optimizer.param_groups[0]["lr"]
    return out


def sft_update(
    model: Any, optimizer: torch.optim.Optimizer, scheduler: Any, rows: Sequence[Row], cfg: TrainConfig,
    *, ref_model: Any = None, temperature: float = 1.0, group: Group = SINGLE,
) -> dict[str, float]:
    """One optimizer step of the supervised loss (mean over all masked tokens of the batch)."""
    if not rows:
        return {}
    batches, _real, norm, _masked = _local_batches(model, rows, cfg, group, "token_mean")
    model.train()
    total = 0.0
    for mb in batches:
        logprobs, _ = _forward_logprobs(model, mb, 1.0, cfg.precision)
        loss, _metrics = sft_loss(logprobs, mb["mask"], normalizer=norm)
        loss.backward()
        total += float(loss.detach())
    (total,) = group.sum([total])
    return {"loss/sft": total, "stats/grad_norm": _step(model, optimizer, scheduler, cfg),
            "update/sequences": float(len(rows)), "update/tokens": float(sum(len(r) for r in rows)),
            "update/micro_batches": float(len(batches)), "optim/lr": optimizer.param_groups[0]["lr"]}


def _step(model: Any, optimizer: torch.optim.Optimizer, scheduler: Any, cfg: TrainConfig) -> float:
    clip = cfg.optim.grad_clip if cfg.optim.grad_clip is not None else math.inf
    total = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], clip)
    # under FSDP the norm is a DTensor over the shards: its full value is the whole model's
    norm = float(total.full_tensor() if hasattr(total, "full_tensor") else total)
    if math.isfinite(norm):
        optimizer.step()
    # a non-finite gradient skips the step instead of poisoning the weights
    optimizer.zero_grad(set_to_none=True)
    if scheduler is not None:
        scheduler.step()
    return norm


def make_optimizer(model: Any, cfg: TrainConfig, total_steps: int) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW and a LambdaLR: linear warmup, then constant, cosine or linear decay to 10%."""
    o = cfg.optim
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)
    total = max(1, total_steps * o.epochs)

    def factor(step: int) -> float:
        if o.warmup_steps and step < o.warmup_steps:
            return (step + 1) / o.warmup_steps
        progress = min(1.0, (step - o.warmup_steps) / max(1, total - o.warmup_steps))
        if o.schedule == "cosine":
            return 0.1 + 0.45 * (1 + math.cos(math.pi * progress))
        if o.schedule == "linear":
            return 1.0 - 0.9 * progress
        return 1.0

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
