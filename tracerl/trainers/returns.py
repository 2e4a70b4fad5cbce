"""Per-step returns and per-step advantages for multi-step trajectories.

A trajectory has T steps (LLM calls). Step t carries an optional reward r_t (None -> 0) and
the episode's final reward is added to the last step's reward. The discounted return is

    G_t = r_t + gamma * G_{t+1},      G_T = 0

With gamma = 1 and no step rewards every step gets the final reward: the usual broadcast of
one outcome reward to every turn, here as a special case rather than the only option.

Per-step advantages. The group estimator (GRPO, RLOO, ...) compares trajectories of the same
group, so its baseline b and scale s come from the group's trajectory-level returns G_{j,0}
(one number per trajectory, like any outcome reward), and are then applied to every step:

    (b_i, s_i) = estimator.baseline_scale(G_{.,0}, groups)[i]
    A_{i,t}    = (G_{i,t} - b_i) / s_i

so a step whose return-to-go is above what the group achieves from the start is reinforced.
With ``per_call`` every step is a sample of its group instead (b, s from all the group's
G_{j,t}), as in Dr. MAS's code (arXiv 2602.08847): a trajectory of 3 calls weighs 3 in its
group's statistics, and an agent called more often pulls its group's baseline harder.
Steps are not compared with other trajectories' step t (turn counts differ between
trajectories, so "step t" means different things). With gamma = 1 and no step rewards
G_{i,t} = G_{i,0} and A_{i,t} equals the trajectory-level advantage exactly.
"""

from __future__ import annotations

from typing import Any

import torch

from tracerl.trainers.algorithms import ESTIMATORS, Estimator


def discounted_returns(
    step_rewards: list[float | None], final_reward: float | None, gamma: float
) -> list[float]:
    """G_t for one trajectory of T = len(step_rewards) steps; [] when T = 0."""
    rewards = [0.0 if r is None else float(r) for r in step_rewards]
    if not rewards:
        return []
    rewards[-1] += 0.0 if final_reward is None else float(final_reward)
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def step_advantages(
    returns_per_traj: list[list[float]],
    groups: list[int],
    estimator: Estimator | str,
    per_call: bool = False,
    **kwargs: Any,
) -> list[list[float]]:
    """A_{i,t} = (G_{i,t} - b_i) / s_i with (b, s) from the group's G_0 values.

    returns_per_traj[i] is trajectory i's [G_0, ..., G_{T_i - 1}]; groups[i] its group index;
    ``estimator`` an ``ESTIMATORS`` entry or its name; kwargs go to the estimator. A
    trajectory with no steps gets [] and takes no part in its group's baseline. ``per_call``:
    (b, s) from every step's G_{j,t} of the group, each step its own sample.
    """
    est = ESTIMATORS[estimator] if isinstance(estimator, str) else estimator
    if len(returns_per_traj) != len(groups):
        raise ValueError(
            f"step_advantages got {len(returns_per_traj)} trajectories but {len(groups)} "
            "group indices; pass one group index per trajectory"
        )
    kept = [i for i, rets in enumerate(returns_per_traj) if rets]
    out: list[list[float]] = [[] for _ in returns_per_traj]
    if not kept:
        return out
    if per_call:
        return _per_call_advantages(returns_per_traj, groups, est, kwargs)
    g0 = torch.tensor([returns_per_traj[i][0] for i in kept])  # [N']
    group_ids = torch.tensor([groups[i] for i in kept], dtype=torch.long)  # [N']
    _, group_ids = torch.unique(group_ids, return_inverse=True)  # dense 0..K'-1
    baseline, scale = est.baseline_scale(g0, group_ids, **kwargs)  # [N'], [N']
    for k, i in enumerate(kept):
        rets = torch.tensor(returns_per_traj[i])  # [T_i]
        out[i] = ((rets - baseline[k]) / scale[k]).tolist()
    return out


def _per_call_advantages(returns_per_traj: list[list[float]], groups: list[int], est: Estimator,
                         kwargs: dict[str, Any]) -> list[list[float]]:
    """Every step a sample: A_{i,t} = (G_{i,t} - b_{i,t}) / s_{i,t} over the group's steps."""
    flat = torch.tensor([g for rets in returns_per_traj for g in rets])  # [S]
    group_ids = torch.tensor([groups[i] for i, rets in enumerate(returns_per_traj) for _ in rets], dtype=torch.long)
    _, group_ids = torch.unique(group_ids, return_inverse=True)
    baseline, scale = est.baseline_scale(flat, group_ids, **kwargs)  # [S], [S]
    values = ((flat - baseline) / scale).tolist()
    out, at = [], 0
    for rets in returns_per_traj:
        out.append(values[at: at + len(rets)])
        at += len(rets)
    return out
