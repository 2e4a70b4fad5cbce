"""Token-level losses: the clipped policy-gradient surrogate, SFT, log-probs and entropy.

Policy loss per masked token (B sequences, T tokens, lp = current log-probs, old = log-probs
of the policy that produced the rollout, recomputed by the trainer):

    ratio   = exp(lp - old)
    pg      = max(-A * ratio, -A * clip(ratio, 1 - eps_low, 1 + eps_high))     PPO, asymmetric
                                                         clip ("clip-higher", DAPO 2503.14476)
    w       = min(exp(old - engine), tis_cap)           truncated importance sampling for the
              (detached; 1 without engine_logprobs)     engine/trainer mismatch,
                                                        https://fengyao.notion.site/off-policy-rl
    k3      = exp(ref - lp) - (ref - lp) - 1            KL(pi || ref) estimator (Schulman)
    loss_t  = w * pg + kl_beta * k3

Aggregation over the batch (``agg``), with n_i the masked tokens of sequence i:

    token_mean            sum_{i,t} loss_t / sum_i n_i
    seq_mean_token_mean   mean over sequences with n_i > 0 of (sum_t loss_t / n_i)
    seq_mean_token_sum    mean over sequences with n_i > 0 of  sum_t loss_t
    constant              sum_{i,t} loss_t / (B * max_tokens)     Dr.GRPO, 2503.20783

Gradient accumulation: a micro-batch's own denominator is wrong for the whole batch, so the
loop passes ``normalizer`` = ``loss_normalizer(agg, all_masks)``: the batch's masked-token
count (token_mean), its number of sequences with a token (seq modes), or its number of
sequences B (constant, times max_tokens). Summing micro-batch losses then equals the loss of
the whole batch, and so do the gradients. Metrics stay per micro-batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import torch
from torch import Tensor

Agg = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "constant"]
AGG_MODES: tuple[str, ...] = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "constant")


def _masked_mean(x: Tensor, mask: Tensor) -> float:
    return float((x * mask).sum() / mask.sum().clamp(min=1))


def _per_seq(loss: Tensor, mask: Tensor, mean: bool) -> Tensor:
    per_seq = (loss * mask).sum(-1)  # [B]
    return per_seq / mask.sum(-1).clamp(min=1) if mean else per_seq


# agg -> (numerator, count of one micro-batch): the count is what ``normalizer`` replaces
_AGG: dict[str, tuple[Callable[[Tensor, Tensor], Tensor], Callable[[Tensor], Tensor]]] = {
    "token_mean": (lambda x, m: (x * m).sum(), lambda m: m.sum()),
    "seq_mean_token_mean": (
        lambda x, m: _per_seq(x, m, mean=True).sum(),
        lambda m: (m.sum(-1) > 0).sum(),
    ),
    "seq_mean_token_sum": (
        lambda x, m: _per_seq(x, m, mean=False).sum(),
        lambda m: (m.sum(-1) > 0).sum(),
    ),
    "constant": (lambda x, m: (x * m).sum(), lambda m: m.new_tensor(float(m.shape[0]))),
}


def _check_agg(agg: str) -> None:
    if agg not in _AGG:
        raise ValueError(f"unknown loss aggregation {agg!r}; choose one of {', '.join(AGG_MODES)}")


def aggregate(
    loss: Tensor,
    mask: Tensor,
    agg: str,
    *,
    max_tokens: int | None = None,
    normalizer: float | None = None,
) -> Tensor:
    """Reduce per-token losses [B, T] under mask [B, T] to a scalar (see module docstring).

    A count of 0 (no tokens, no sequences) is taken as 1, so an empty batch gives 0, not NaN.
    """
    _check_agg(agg)
    if agg == "constant" and (max_tokens is None or max_tokens <= 0):
        raise ValueError(
            "agg='constant' (Dr.GRPO) divides by B * max_tokens, so max_tokens is required: "
            "pass the generation limit (max new tokens), e.g. policy_loss(..., max_tokens=1024)"
        )
    numerator, count = _AGG[agg]
    mask = mask.to(loss.dtype)
    denom = count(mask).clamp(min=1) if normalizer is None else max(normalizer, 1.0)
    scale = max_tokens if agg == "constant" and max_tokens is not None else 1  # checked above
    return numerator(loss, mask) / (denom * scale)


def loss_normalizer(agg: str, masks: Sequence[Tensor]) -> float:
    """The ``normalizer`` for accumulating micro-batches with masks [B_k, T_k] into one step."""
    _check_agg(agg)
    return float(sum(float(_AGG[agg][1](m.float())) for m in masks))


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    agg: Agg = "token_mean",
    max_tokens: int | None = None,
    normalizer: float | None = None,
    ref_logprobs: Tensor | None = None,
    kl_beta: float = 0.0,
    engine_logprobs: Tensor | None = None,
    tis_cap: float | None = 2.0,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped policy-gradient loss. logprobs/old/ref/engine/mask: [B, T]; advantages [B] or [B, T]."""
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)  # [B] -> [B, T]
    if advantages.shape != logprobs.shape or mask.shape != logprobs.shape:
        raise ValueError(
            f"policy_loss shapes disagree: logprobs {tuple(logprobs.shape)}, mask "
            f"{tuple(mask.shape)}, advantages {tuple(advantages.shape)}; expected [B, T] and [B] "
            "or [B, T] advantages"
        )
    on = mask > 0  # [B, T] bool
    mask = mask.to(logprobs.dtype)
    advantages = advantages.detach()
    # masked positions may hold padding garbage; zeroing the log-ratio there keeps exp finite
    ratio = torch.where(on, logprobs - old_logprobs.detach(), 0.0).exp()  # [B, T]
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    pg = torch.maximum(unclipped, clipped)  # [B, T]
    weight = torch.ones_like(pg)
    if engine_logprobs is not None:
        weight = torch.where(on, old_logprobs - engine_logprobs, 0.0).exp().detach()
        if tis_cap is not None:
            weight = weight.clamp(max=tis_cap)
    pg = weight * pg
    k3 = torch.zeros_like(pg)
    if ref_logprobs is not None and kl_beta > 0:
        delta = torch.where(on, ref_logprobs.detach() - logprobs, 0.0)  # [B, T]
        k3 = delta.exp() - delta - 1.0
    loss = aggregate(pg + kl_beta * k3, mask, agg, max_tokens=max_tokens, normalizer=normalizer)
    with torch.no_grad():
        metrics = {
            "loss/policy": float(
                aggregate(pg, mask, agg, max_tokens=max_tokens, normalizer=normalizer)
            ),
            "loss/kl": _masked_mean(k3, mask),
            "loss/total": float(loss.detach()),
            "stats/clip_frac": _masked_mean((clipped > unclipped).to(pg.dtype), mask),
            "stats/ratio_mean": _masked_mean(ratio, mask),
            "stats/tis_weight_mean": 1.0,
        }
        if engine_logprobs is not None:
            metrics["stats/tis_weight_mean"] = _masked_mean(weight, mask)
            # how far the trainer's numbers are from the sampler's (bf16 engines, kernels, stale
            # weights): the mean gap per token, and the largest uncapped importance weight
            gap = torch.where(on, old_logprobs.detach() - engine_logprobs, 0.0)
            metrics["stats/engine_logprob_gap_mean"] = _masked_mean(gap.abs(), mask)
            metrics["stats/engine_ratio_max"] = float(gap[on].exp().max()) if bool(on.any()) else 1.0
    return loss, metrics


def sft_loss(
    logprobs: Tensor, mask: Tensor, *, normalizer: float | None = None
) -> tuple[Tensor, dict[str, float]]:
    """Negative mean log-prob over masked tokens. logprobs, mask: [B, T]. normalizer as token_mean."""
    loss = aggregate(-logprobs, mask, "token_mean", normalizer=normalizer)
    return loss, {"loss/sft": float(loss.detach())}


# Elements of one fp32 [rows, T, V] temporary: big enough to batch a small vocabulary's rows
# together, small enough that a 150k-token vocabulary goes one sequence at a time.
CHUNK_ELEMENTS = 1 << 25


def _chunks(logits: Tensor) -> int:
    per_row = max(1, logits.shape[1] * logits.shape[2])
    return max(1, CHUNK_ELEMENTS // per_row)


def token_logprobs(logits: Tensor, targets: Tensor, temperature: float = 1.0) -> Tensor:
    """log softmax(logits / temperature) at targets. logits [B, T, V], targets [B, T] -> [B, T] fp32.

    gather - logsumexp over chunks of rows: never a [B, T, V] log-softmax output, and the
    logsumexp temporary stays under CHUNK_ELEMENTS. Rows are upcast to fp32 because bf16
    loses the small log-prob differences that importance ratios are made of.
    """
    if logits.shape[0] == 0:
        return logits.new_zeros(targets.shape, dtype=torch.float32)
    step = _chunks(logits)
    out = []
    for start in range(0, logits.shape[0], step):
        rows = logits[start:start + step].float()  # [b, T, V]
        if temperature != 1.0:
            rows = rows / temperature
        picked = rows.gather(-1, targets[start:start + step, :, None]).squeeze(-1)  # [b, T]
        out.append(picked - torch.logsumexp(rows, dim=-1))
    return torch.cat(out)


@torch.no_grad()
def entropy(logits: Tensor, mask: Tensor) -> float:
    """Mean entropy -sum_v p log p per masked token. logits [B, T, V], mask [B, T]."""
    total, count = 0.0, float(mask.sum())
    step = _chunks(logits)
    for start in range(0, logits.shape[0], step):
        logp = torch.log_softmax(logits[start:start + step].float(), dim=-1)  # [b, T, V]
        ent = -(logp.exp() * logp).sum(-1)  # [b, T]
        total += float((ent * mask[start:start + step].float()).sum())
    return total / count if count > 0 else 0.0
