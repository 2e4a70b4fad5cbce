"""RLOO: REINFORCE with a leave-one-out baseline (https://arxiv.org/abs/2402.14740).

For member i of a group of G members:

    A_i = r_i - 1/(G-1) * sum_{j != i} r_j  =  G/(G-1) * (r_i - mean_g(r))

No scaling. A group of one member has advantage 0 (there is no other member to compare with).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tracerl.trainers.algorithms.grpo import group_count, group_sum


def baseline_scale(rewards: Tensor, groups: Tensor) -> tuple[Tensor, Tensor]:
    """Baseline b (mean of the other members) and scale s = 1, each [N]: A = (r - b) / s."""
    others = (group_count(groups) - 1).to(rewards.dtype)  # [N]
    loo_mean = (group_sum(rewards, groups) - rewards) / others.clamp(min=1)
    # a lone member is its own baseline, so its advantage is exactly 0
    baseline = torch.where(others > 0, loo_mean, rewards)
    return baseline, torch.ones_like(rewards)


def advantages(rewards: Tensor, groups: Tensor) -> Tensor:
    """RLOO advantages. rewards: [N] float, groups: [N] long -> [N]."""
    baseline, s = baseline_scale(rewards, groups)
    return (rewards - baseline) / s
