"""GRPO: group-relative advantages (https://arxiv.org/abs/2402.03300).

For member i of group g with G members and rewards r:

    A_i = (r_i - mean_g(r)) / s        s = std_g(r) + eps   scale="group"   (GRPO)
                                       s = std(r) + eps     scale="batch"   (whole batch)
                                       s = 1                scale="none"    (Dr.GRPO,
                                                            https://arxiv.org/abs/2503.20783)

The std is the unbiased one (divisor G-1), as ``torch.std`` and TRL use. A group of one
member has advantage 0 (its baseline is its own reward). The per-group helpers here are
shared by the other estimators.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

Scale = Literal["group", "batch", "none"]


def group_count(groups: Tensor) -> Tensor:
    """Size of each member's group. groups: [N] long -> [N] long."""
    return torch.bincount(groups)[groups]


def group_sum(x: Tensor, groups: Tensor) -> Tensor:
    """Sum of x over each member's group. x: [N] float, groups: [N] long -> [N]."""
    num_groups = int(groups.max()) + 1 if groups.numel() else 0
    sums = x.new_zeros(num_groups).index_add_(0, groups, x)  # [K]
    return sums[groups]


def group_mean(x: Tensor, groups: Tensor) -> Tensor:
    """Mean of x over each member's group. [N] -> [N]."""
    return group_sum(x, groups) / group_count(groups).to(x.dtype)


def group_std(x: Tensor, groups: Tensor) -> Tensor:
    """Unbiased std of x over each member's group, 0 for a group of one. [N] -> [N]."""
    centered = x - group_mean(x, groups)
    dof = (group_count(groups) - 1).clamp(min=1).to(x.dtype)
    return (group_sum(centered**2, groups) / dof).sqrt()


def batch_std(x: Tensor) -> Tensor:
    """Unbiased std of the whole batch as a 0-d tensor, 0 when N < 2 (no NaN)."""
    return x.std() if x.numel() > 1 else x.new_zeros(())


def baseline_scale(
    rewards: Tensor, groups: Tensor, *, scale: Scale = "group", eps: float = 1e-6
) -> tuple[Tensor, Tensor]:
    """Baseline b and scale s, each [N], such that A = (r - b) / s."""
    baseline = group_mean(rewards, groups)
    if scale == "group":
        return baseline, group_std(rewards, groups) + eps
    if scale == "batch":
        return baseline, (batch_std(rewards) + eps).expand_as(rewards)
    if scale == "none":
        return baseline, torch.ones_like(rewards)
    raise ValueError(f"GRPO scale must be 'group', 'batch' or 'none', got {scale!r}")


def advantages(
    rewards: Tensor, groups: Tensor, *, scale: Scale = "group", eps: float = 1e-6
) -> Tensor:
    """GRPO advantages. rewards: [N] float, groups: [N] long in 0..K-1 -> [N]."""
    baseline, s = baseline_scale(rewards, groups, scale=scale, eps=eps)
    return (rewards - baseline) / s
