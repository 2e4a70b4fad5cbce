"""Advantage estimators: pure functions of (rewards [N], groups [N]) -> advantages [N].

A group is the set of trajectories for the same task and the same agent name; ``groups`` holds
its index 0..K-1 per member. Every estimator here has the form

    A_i = (r_i - b_i) / s_i

with a baseline b and a scale s computed from the member's group (or the batch). Each
``ESTIMATORS`` entry exposes that pair as ``.baseline_scale`` so per-step advantages can reuse
the group's trajectory-level baseline and scale (see ``tracerl.trainers.returns``).

    name           b_i                          s_i
    grpo           group mean                   group std + eps      (unbiased std)
    dr_grpo        group mean                   1
    rloo           mean of the other members    1
    reinforce      batch mean (or 0)            1
    reinforce_pp   group mean                   batch std of (r - b) + eps
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from tracerl.trainers.algorithms import grpo, reinforce, rloo

BaselineScale = Callable[..., tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator: call it as ``est(rewards, groups, **kwargs) -> Tensor [N]``."""

    name: str
    baseline_scale_fn: BaselineScale
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def baseline_scale(
        self, rewards: Tensor, groups: Tensor, **kwargs: Any
    ) -> tuple[Tensor, Tensor]:
        """(b [N], s [N]) for these rewards; kwargs override the estimator's defaults."""
        return self.baseline_scale_fn(rewards, groups, **{**self.defaults, **kwargs})

    def __call__(self, rewards: Tensor, groups: Tensor, **kwargs: Any) -> Tensor:
        baseline, scale = self.baseline_scale(rewards, groups, **kwargs)
        return (rewards - baseline) / scale


ESTIMATORS: dict[str, Estimator] = {
    "grpo": Estimator("grpo", grpo.baseline_scale),
    "dr_grpo": Estimator("dr_grpo", grpo.baseline_scale, {"scale": "none"}),
    "rloo": Estimator("rloo", rloo.baseline_scale),
    "reinforce": Estimator("reinforce", reinforce.baseline_scale),
    "reinforce_pp": Estimator("reinforce_pp", reinforce.plus_plus_baseline_scale),
}


def zero_variance_mask(rewards: Tensor, groups: Tensor, tol: float = 1e-8) -> Tensor:
    """True [N] where the member's group has all-equal rewards (max - min <= tol).

    Such groups give every member advantage 0 under group baselines, so no gradient; the
    trainer drops and counts them. A group of one member counts as zero variance.
    """
    num_groups = int(groups.max()) + 1 if groups.numel() else 0
    empty = rewards.new_zeros(num_groups)
    high = empty.scatter_reduce(0, groups, rewards, reduce="amax", include_self=False)  # [K]
    low = empty.scatter_reduce(0, groups, rewards, reduce="amin", include_self=False)  # [K]
    return ((high - low) <= tol)[groups]


__all__ = ["ESTIMATORS", "Estimator", "grpo", "reinforce", "rloo", "zero_variance_mask"]
