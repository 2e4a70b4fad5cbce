"""From episodes to training rows: exclusion, zero-variance groups, per-agent estimators,
per-step discounted advantages placed on the right response tokens, micro-batch packing."""

from __future__ import annotations

import pytest

from tracerl.core.types import Episode, Step, Task, TerminationReason, TokenSequence, Trajectory
from tracerl.trainers.batching import make_batch, micro_batches
from tracerl.trainers.config import TrainConfig

pytest.importorskip("torch")


def traj(name: str, reward: float | None = None, step_rewards=(None,)) -> Trajectory:
    """One sequence: prompt [1, 2], then per step a 2-token response and a 1-token glue."""
    ids, mask, spans, steps = [1, 2], [0, 0], [], []
    for k, r in enumerate(step_rewards):
        start = len(ids)
        ids += [10 + k, 20 + k]
        mask += [1, 1]
        spans.append((start, start + 2))
        steps.append(Step(id=f"{name}{k}", reward=r))
        if k + 1 < len(step_rewards):
            ids.append(3)
            mask.append(0)
    seq = TokenSequence(token_ids=ids, mask=mask, logprobs=[0.0] * len(ids),
                        step_indices=list(range(len(steps))), response_spans=spans)
    return Trajectory(name=name, steps=steps, sequences=[seq], reward=reward)


def ep(eid: str, task: str, reward: float, *trajs: Trajectory, reason=TerminationReason.SUCCESS) -> Episode:
    return Episode(id=eid, task=Task(id=task), trajectories=list(trajs) or [traj("main")], reward=reward,
                   termination_reason=reason)


def test_excluded_and_zero_variance_episodes_are_left_out_and_counted():
    episodes = [
        ep("a0", "a", 1.0), ep("a1", "a", 0.0),
        ep("b0", "b", 1.0), ep("b1", "b", 1.0),  # no variance
        ep("a2", "a", 1.0, reason=TerminationReason.ERROR), ep("a3", "a", 0.0, reason=TerminationReason.TIMEOUT),
    ]
    batch = make_batch(episodes, TrainConfig(algo={"type": "grpo"}))
    assert batch.metrics["episodes/excluded"] == 2
    assert batch.metrics["episodes/error"] == 1 and batch.metrics["episodes/timeout"] == 1
    assert batch.metrics["groups/zero_variance_share"] == 0.5
    # group a = [1, 0]: mean 0.5, unbiased std sqrt(0.5) -> advantages +-0.5/0.7071 = +-0.7071
    advs = sorted(max(r.advantages, key=abs) for r in batch.rows)
    assert advs == pytest.approx([-0.70710, 0.70710], abs=1e-4)


def test_each_agent_gets_its_own_estimator():
    solver = [traj("solver") for _ in range(3)]
    judge = [traj("judge", reward=r) for r in (1.0, 0.0, 0.0)]
    episodes = [ep(f"e{i}", "t", r, solver[i], judge[i]) for i, r in enumerate((1.0, 1.0, 0.0))]
    cfg = TrainConfig(algo={"type": "rloo"}, algo_by_agent={"judge": {"type": "reinforce", "baseline": "none"}})
    rows = make_batch(episodes, cfg).rows
    by_agent = {name: [max(r.advantages, key=abs) for r in rows if r.agent == name] for name in ("solver", "judge")}
    # solver RLOO on [1, 1, 0]: 1 - mean(1, 0) = 0.5, 0.5, and 0 - 1 = -1
    assert by_agent["solver"] == pytest.approx([0.5, 0.5, -1.0])
    # judge plain REINFORCE on its own rewards [1, 0, 0]: the reward itself
    assert by_agent["judge"] == pytest.approx([1.0, 0.0, 0.0])


def test_per_step_rewards_are_discounted_onto_their_own_response_tokens():
    t0 = traj("main", step_rewards=(0.5, None))  # a step reward on turn 1, final reward 1
    t1 = traj("main", step_rewards=(None, None))
    episodes = [ep("x", "t", 1.0, t0), ep("y", "t", 0.0, t1)]
    rows = make_batch(episodes, TrainConfig(algo={"type": "dr_grpo"}, loss={"gamma": 0.5})).rows
    # returns x: G1 = 1, G0 = 0.5 + 0.5 * 1 = 1.0; y: G = 0, 0. baseline = mean(G0) = 0.5
    x = rows[0]
    # shifted by one: response tokens of step 0 sit at targets 1..2, step 1 at 4..5
    assert x.mask == [0, 1, 1, 0, 1, 1]
    assert x.advantages == pytest.approx([0, 0.5, 0.5, 0, 0.5, 0.5])
    assert rows[1].advantages == pytest.approx([0, -0.5, -0.5, 0, -0.5, -0.5])
    t2 = traj("main", step_rewards=(1.0, None))
    rows = make_batch([ep("x", "t", 0.0, t2), ep("y", "t", 0.0, traj("main", step_rewards=(None, None)))],
                      TrainConfig(algo={"type": "dr_grpo"}, loss={"gamma": 1.0})).rows
    # x: G0 = 1, G1 = 0 (the step reward is behind turn 2); baseline 0.5
    assert rows[0].advantages == pytest.approx([0, 0.5, 0.5, 0, -0.5, -0.5])


def test_micro_batches_respect_the_token_budget():
    rows = make_batch([ep(f"e{i}", "t", float(i % 2)) for i in range(8)], TrainConfig()).rows
    packed = micro_batches(rows, token_budget=2 * len(rows[0]))
    assert sum(len(mb) for mb in packed) == len(rows) and all(len(mb) <= 2 for mb in packed)


@pytest.mark.parametrize(("vocab", "device", "tokens"), [
    (576, "cpu", 8192), (49_152, "cpu", 1365), (151_936, "cpu", 441), (10**7, "cpu", 64), (151_936, "cuda", 3533),
])
def test_a_large_vocabulary_gets_smaller_micro_batches(vocab, device, tokens):
    """The logits of a micro-batch (tokens x vocabulary) stay under ``micro_batch_logits``: the
    bundled model keeps the token budget, SmolLM2 and Qwen2.5 get fewer tokens, never under 64;
    a GPU's default cap is 8x the CPU's."""
    from types import SimpleNamespace

    from tracerl.trainers.update import token_budget

    param = SimpleNamespace(device=SimpleNamespace(type=device))
    model = SimpleNamespace(config=SimpleNamespace(vocab_size=vocab), parameters=lambda: iter([param]))
    assert token_budget(model, TrainConfig()) == tokens
    assert token_budget(model, TrainConfig.model_validate({"optim": {"micro_batch_logits": 2**40}})) == 8192


def _advantages(episodes, cfg):
    """{(episode id, agent): that trajectory's step advantages} as score gives them."""
    from tracerl.trainers.batching import score

    return {(s.episode.id, s.trajectory.name): s.advantages for s in score(episodes, cfg)[0]}


def test_pooling_a_task_mixes_the_agents_rewards_and_per_agent_groups_do_not():
    # The judge was right both times (reward 1, 1); the solver once (1, 0).
    episodes = [ep(f"e{i}", "t", r, traj("solver"), traj("judge", reward=1.0)) for i, r in enumerate((1.0, 0.0))]
    per_agent = _advantages(episodes, TrainConfig())
    assert per_agent[("e0", "solver")] == pytest.approx([0.7071], abs=1e-4)
    assert per_agent[("e0", "judge")] == [0.0] and per_agent[("e1", "judge")] == [0.0]  # a flat group: no push
    pooled = _advantages(episodes, TrainConfig(group_by="task"))
    # one group of [1, 0, 1, 1]: mean 0.75, std 0.5; the judge is pushed up for what the solver did
    assert pooled[("e0", "judge")] == pooled[("e1", "judge")] == pytest.approx([0.5], abs=1e-4)
    assert pooled[("e1", "solver")] == pytest.approx([-1.5], abs=1e-4)
    batch = make_batch(episodes, TrainConfig(group_by="task"))
    assert batch.metrics["groups/total"] == 1 and len(batch.rows) == 4


def test_with_calls_as_samples_an_agent_called_more_often_weighs_more():
    three, one = traj("main", step_rewards=(None, None, None)), traj("main")
    episodes = [ep("e0", "t", 1.0, three), ep("e1", "t", 0.0, one)]
    by_trajectory = _advantages(episodes, TrainConfig())
    assert by_trajectory[("e0", "main")] == pytest.approx([0.7071] * 3, abs=1e-4)
    by_call = _advantages(episodes, TrainConfig(group_samples="call"))
    # samples [1, 1, 1, 0]: mean 0.75, unbiased std 0.5
    assert by_call[("e0", "main")] == pytest.approx([0.5] * 3, abs=1e-4)
    assert by_call[("e1", "main")] == pytest.approx([-1.5], abs=1e-4)


def test_group_settings_that_cannot_work_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="one estimator"):
        TrainConfig(group_by="task", algo_by_agent={"judge": {"type": "rloo"}})
    with pytest.raises(ValueError, match="leave-one-out"):
        TrainConfig(group_samples="call", algo={"type": "rloo"})
