"""From episodes to training rows: filter, group, advantages, per-token rows, micro-batches.

The trainer sees only :class:`Row` objects: one token-in/token-out sequence of one
trajectory, shifted for next-token prediction, with a per-token advantage that is non-zero
only on the model's own tokens. Episodes that ended badly (``TrainConfig.exclude``) and
groups without reward variance are counted and left out here, so the loss never sees them
(ARCHITECTURE: nothing crashes the trainer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracerl.core.types import Episode, Trajectory

from .config import TrainConfig
from .returns import discounted_returns, step_advantages


@dataclass
class Row:
    """One training sequence, already shifted: ``targets[i]`` follows ``input_ids[i]``."""

    input_ids: list[int]
    targets: list[int]
    mask: list[int]  # 1 where targets[i] was sampled by the policy
    advantages: list[float]
    engine_logprobs: list[float] | None  # the sampler's logprob of targets[i] (0 off-mask)
    agent: str = "main"

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class Batch:
    """The rows of one update and what was left out on the way, for the metrics."""

    rows: list[Row] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)


def estimator_kwargs(algo: Any) -> dict[str, Any]:
    """The config of an estimator as keyword arguments of its function."""
    kwargs = algo.model_dump(exclude={"type"})
    if "scale_rewards" in kwargs:
        kwargs["scale"] = kwargs.pop("scale_rewards")
    return kwargs


def trajectory_reward(ep: Episode, traj: Trajectory) -> float:
    """An agent's own final reward (e.g. the judge's), else the episode's; none counts as 0."""
    if traj.reward is not None:
        return float(traj.reward)
    return float(ep.reward) if ep.reward is not None else 0.0


@dataclass
class Scored:
    """A trajectory the update would see, with the advantage of each of its steps; ``flat``:
    its (task, agent) group's rewards were all equal (no gradient; dropped when configured)."""

    episode: Episode
    trajectory: Trajectory
    advantages: list[float]
    flat: bool


def score(episodes: Sequence[Episode], cfg: TrainConfig) -> tuple[list[Scored], int]:
    """The kept episodes' trajectories with their advantages, and the number of groups. A
    group is (task, agent) by default, each agent under its own estimator, or the task with
    every agent pooled (``cfg.group_by``); its samples are trajectories or calls
    (``cfg.group_samples``). What :func:`make_batch` trains on, and what the dashboard shows."""
    excluded = {r.value for r in cfg.exclude}
    kept = [ep for ep in episodes if ep.termination_reason.value not in excluded]
    pooled = cfg.group_by == "task"
    # estimator scope (an agent, or "" for all when pooled) -> (episode, trajectory, group key)
    scopes: dict[str, list[tuple[Episode, Trajectory, tuple[str, str]]]] = {}
    for ep in kept:
        task_id = ep.task.id if ep.task is not None else ep.id
        for traj in ep.trajectories:
            if traj.sequences:
                scope = "" if pooled else traj.name
                scopes.setdefault(scope, []).append((ep, traj, (task_id, scope)))
    per_call = cfg.group_samples == "call"
    out: list[Scored] = []
    groups = 0
    for scope, members in scopes.items():
        algo = cfg.algo if pooled else cfg.estimator_for(scope)
        keys = {key: i for i, key in enumerate(dict.fromkeys(m[2] for m in members))}
        returns = [
            discounted_returns([s.reward for s in traj.steps], trajectory_reward(ep, traj), cfg.loss.gamma)
            for ep, traj, _ in members
        ]
        group_of = [keys[m[2]] for m in members]
        samples: dict[int, set[float]] = {}
        for g, ret in zip(group_of, returns):
            samples.setdefault(g, set()).update(round(r, 9) for r in (ret if per_call else ret[:1]))
        flat = {g for g, values in samples.items() if len(values) <= 1}
        groups += len(samples)
        advantages = step_advantages(returns, group_of, algo.type, per_call=per_call, **estimator_kwargs(algo))
        out.extend(Scored(ep, traj, [float(a) for a in adv], g in flat)
                   for (ep, traj, _key), g, adv in zip(members, group_of, advantages))
    return out, groups


def make_batch(episodes: Sequence[Episode], cfg: TrainConfig) -> Batch:
    """Filter, group by (task, agent), compute advantages per agent's estimator, make rows."""
    batch = Batch()
    reasons = Counter(ep.termination_reason.value for ep in episodes)
    for reason, count in reasons.items():
        batch.metrics[f"episodes/{reason}"] = float(count)
    excluded = {r.value for r in cfg.exclude}
    batch.metrics["episodes/excluded"] = float(sum(ep.termination_reason.value in excluded for ep in episodes))
    scored, groups_total = score(episodes, cfg)
    dropped_groups = set()
    for item in scored:
        if cfg.drop_zero_variance and item.flat:
            task_id = item.episode.task.id if item.episode.task is not None else item.episode.id
            dropped_groups.add((task_id, "" if cfg.group_by == "task" else item.trajectory.name))
            continue
        batch.rows.extend(trajectory_rows(item.trajectory, item.advantages))
    batch.metrics["groups/total"] = float(groups_total)
    batch.metrics["groups/zero_variance_share"] = len(dropped_groups) / groups_total if groups_total else 0.0
    return batch


def trajectory_rows(traj: Trajectory, step_adv: Sequence[float]) -> list[Row]:
    """One row per sequence; each response span gets the advantage of the step it came from."""
    rows = []
    for seq in traj.sequences:
        adv = [0.0] * len(seq.token_ids)
        for step_index, (start, end) in zip(seq.step_indices, seq.response_spans):
            a = float(step_adv[step_index]) if step_index < len(step_adv) else 0.0
            adv[start:end] = [a] * (end - start)
        mask = seq.mask
        lp = seq.logprobs
        rows.append(Row(
            input_ids=seq.token_ids[:-1], targets=seq.token_ids[1:], mask=mask[1:],
            advantages=[a if m else 0.0 for a, m in zip(adv[1:], mask[1:])],
            engine_logprobs=lp[1:] if lp is not None else None, agent=traj.name,
        ))
    return rows


def micro_batches(rows: Sequence[Row], token_budget: int) -> list[list[Row]]:
    """Pack rows, longest first, so that rows x longest row <= ``token_budget`` per micro-batch
    (one row longer than the budget still gets a micro-batch of its own)."""
    out: list[list[Row]] = []
    current: list[Row] = []
    for row in sorted(rows, key=len, reverse=True):
        width = len(current[0]) if current else len(row)
        if current and (len(current) + 1) * width > token_budget:
            out.append(current)
            current = []
        current.append(row)
    if current:
        out.append(current)
    return out
