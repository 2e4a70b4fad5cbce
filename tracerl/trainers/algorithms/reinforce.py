"""REINFORCE (Williams 1992) and REINFORCE++-baseline (https://arxiv.org/abs/2501.03262).

Plain REINFORCE ignores groups:

    A_i = r_i                 baseline="none"
    A_i = r_i - mean(r)       baseline="batch_mean"

REINFORCE++-baseline centres each reward on its group mean, then divides by the std of the
centred values over the whole batch (not per group, which is what separates it from GRPO and
keeps low-variance groups from being blown up):

    c_i = r_i - mean_g(r)     A_i = c_i / (std(c) + eps)      (unbiased std, as torch.std)
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from tracerl.trainers.algorithms.grpo import batch_std, group_mean

Baseline = Literal["none", "batch_mean"]


def baseline_scale(
    rewards: Tensor, groups: Tensor, *, baseline: Baseline = "batch_mean"
) -> tuple[Tensor, Tensor]:
    """Baseline b and scale s = 1, each [N], such that A = (r - b) / s."""
    if baseline == "none":
        return torch.zeros_like(rewards), torch.ones_like(rewards)
    if baseline == "batch_mean":
        mean = rewards.mean() if rewards.numel() else rewards.new_zeros(())
        return mean.expand_as(rewards), torch.ones_like(rewards)
    raise ValueError(f"REINFORCE baseline must be 'none' or 'batch_mean', got {baseline!r}")


def advantages(rewards: Tensor, groups: Tensor, *, baseline: Baseline = "batch_mean") -> Tensor:
    """REINFORCE advantages. rewards: [N] float, groups: [N] long (unused) -> [N]."""
    b, s = baseline_scale(rewards, groups, baseline=baseline)
    return (rewards - b) / s


def plus_plus_baseline_scale(
    rewards: Tensor, groups: Tensor, *, eps: float = 1e-6
) -> tuple[Tensor, Tensor]:
    """REINFORCE++-baseline's b (group mean) and s (batch std of r - b + eps), each [N]."""
    b = group_mean(rewards, groups)
    return b, (batch_std(rewards - b) + eps).expand_as(rewards)


def plus_plus_advantages(rewards: Tensor, groups: Tensor, eps: float = 1e-6) -> Tensor:
    """REINFORCE++-baseline advantages. rewards: [N] float, groups: [N] long -> [N]."""
    b, s = plus_plus_baseline_scale(rewards, groups, eps=eps)
    return (rewards - b) / s
