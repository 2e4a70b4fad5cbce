"""Advantage estimators and per-step returns against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from tracerl.trainers.algorithms import ESTIMATORS, grpo, reinforce, rloo, zero_variance_mask
from tracerl.trainers.returns import discounted_returns, step_advantages

# Three groups, interleaved so index handling matters:
#   group 0 = positions 0, 2, 5 with rewards [1, 0, 0]   mean 1/3
#   group 1 = positions 1, 4    with rewards [1, 3]      mean 2
#   group 2 = position  3       with reward  [5]         a group of one
R = torch.tensor([1.0, 1.0, 0.0, 5.0, 3.0, 0.0])
G = torch.tensor([0, 1, 0, 2, 1, 0])
# r - group mean: [1 - 1/3, 1 - 2, 0 - 1/3, 5 - 5, 3 - 2, 0 - 1/3]
CENTERED = [2 / 3, -1.0, -1 / 3, 0.0, 1.0, -1 / 3]


def close(actual: torch.Tensor, expected: list[float], tol: float = 1e-5) -> None:
    assert actual.shape == (len(expected),)
    assert torch.allclose(actual, torch.tensor(expected), atol=tol), (actual, expected)


def test_grpo_two_groups_of_two() -> None:
    # [1, 0 | 0, 1]: each group has mean 0.5 and unbiased std sqrt((0.25 + 0.25) / 1) = 0.70711
    # so A = +-0.5 / 0.70711 = +-0.70711
    adv = grpo.advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 1, 1]))
    close(adv, [0.70711, -0.70711, -0.70711, 0.70711])


def test_grpo_group_scale() -> None:
    # group 0: squares of deviations 4/9 + 1/9 + 1/9 = 2/3, / (3 - 1) = 1/3, std = 1/sqrt(3)
    #          A = [2/3, -1/3, -1/3] * sqrt(3) = [1.15470, -0.57735, -0.57735]
    # group 1: deviations [-1, 1], var = 2 / 1 = 2, std = sqrt(2), A = [-0.70711, 0.70711]
    # group 2: one member -> 0
    close(grpo.advantages(R, G), [1.15470, -0.70711, -0.57735, 0.0, 0.70711, -0.57735])


def test_grpo_batch_scale() -> None:
    # batch mean 10/6 = 5/3; deviations [-2/3, -2/3, -5/3, 10/3, 4/3, -5/3]
    # squares 4/9 + 4/9 + 25/9 + 100/9 + 16/9 + 25/9 = 174/9; / (6 - 1) = 3.86667; std 1.96638
    std = math.sqrt(174 / 9 / 5)
    assert abs(std - 1.96638) < 1e-5
    close(grpo.advantages(R, G, scale="batch"), [c / std for c in CENTERED])


def test_dr_grpo_is_unscaled() -> None:
    close(grpo.advantages(R, G, scale="none"), CENTERED)
    close(ESTIMATORS["dr_grpo"](R, G), CENTERED)


def test_grpo_rejects_unknown_scale() -> None:
    with pytest.raises(ValueError, match="'group', 'batch' or 'none'"):
        grpo.advantages(R, G, scale="std")  # type: ignore[arg-type]


def test_rloo() -> None:
    # group 0: 1 - mean(0, 0) = 1;  0 - mean(1, 0) = -0.5 (twice)    (= 3/2 * centered)
    # group 1: 1 - 3 = -2;          3 - 1 = 2                         (= 2/1 * centered)
    # group 2: a group of one -> 0
    close(rloo.advantages(R, G), [1.0, -2.0, -0.5, 0.0, 2.0, -0.5])


def test_reinforce() -> None:
    close(reinforce.advantages(R, G, baseline="none"), R.tolist())
    # batch mean 5/3
    close(reinforce.advantages(R, G), [r - 5 / 3 for r in R.tolist()])


def test_reinforce_plus_plus() -> None:
    # centered c = [2/3, -1, -1/3, 0, 1, -1/3], sums to 0 so its batch mean is 0
    # sum c^2 = 4/9 + 1 + 1/9 + 0 + 1 + 1/9 = 8/3; / (6 - 1) = 8/15; std = 0.730297
    # A = c / 0.730297
    close(
        reinforce.plus_plus_advantages(R, G), [0.91287, -1.36931, -0.45644, 0.0, 1.36931, -0.45644]
    )


def test_registry_matches_modules_and_passes_kwargs() -> None:
    assert sorted(ESTIMATORS) == ["dr_grpo", "grpo", "reinforce", "reinforce_pp", "rloo"]
    assert torch.equal(ESTIMATORS["grpo"](R, G), grpo.advantages(R, G))
    assert torch.equal(
        ESTIMATORS["grpo"](R, G, scale="batch"), grpo.advantages(R, G, scale="batch")
    )
    assert torch.equal(ESTIMATORS["rloo"](R, G), rloo.advantages(R, G))
    assert torch.equal(ESTIMATORS["reinforce"](R, G), reinforce.advantages(R, G))
    assert torch.equal(ESTIMATORS["reinforce_pp"](R, G), reinforce.plus_plus_advantages(R, G))


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimators_handle_single_and_empty_batches(name: str) -> None:
    one = ESTIMATORS[name](torch.tensor([3.0]), torch.tensor([0]))
    assert not torch.isnan(one).any()
    empty = ESTIMATORS[name](torch.zeros(0), torch.zeros(0, dtype=torch.long))
    assert empty.shape == (0,)


def test_zero_variance_mask() -> None:
    # group 0 [1, 1] equal; group 1 [0, 1] differs; group 2 [7] alone -> zero variance
    mask = zero_variance_mask(
        torch.tensor([1.0, 0.0, 1.0, 1.0, 7.0]), torch.tensor([0, 1, 0, 1, 2])
    )
    assert mask.tolist() == [True, False, True, False, True]
    assert zero_variance_mask(torch.tensor([1.0, 1.0 + 1e-3]), torch.tensor([0, 0])).tolist() == [
        False,
        False,
    ]


def test_discounted_returns() -> None:
    # r = [0, 0.5, 0 + 1.0]; G2 = 1.0; G1 = 0.5 + 0.9 * 1.0 = 1.4; G0 = 0 + 0.9 * 1.4 = 1.26
    got = discounted_returns([None, 0.5, None], 1.0, 0.9)
    assert got == pytest.approx([1.26, 1.4, 1.0])
    # gamma = 1, no step rewards: the final reward is broadcast to every step
    assert discounted_returns([None, None, None], 2.0, 1.0) == [2.0, 2.0, 2.0]
    # no final reward: r = [1, 0], G1 = 0, G0 = 1 + 0.5 * 0
    assert discounted_returns([1.0, None], None, 0.5) == [1.0, 0.0]
    assert discounted_returns([], 1.0, 1.0) == []


def test_step_advantages_by_hand() -> None:
    # group 0: a = [1.26, 1.4, 1.0], b = [0.0]; group 1: c alone
    returns = [[1.26, 1.4, 1.0], [0.0], [3.0, 3.0]]
    # RLOO: baseline of a = G0 of b = 0; baseline of b = G0 of a = 1.26; c alone -> own G0
    got = step_advantages(returns, [0, 0, 1], "rloo")
    assert got[0] == pytest.approx([1.26, 1.4, 1.0])
    assert got[1] == pytest.approx([-1.26])
    assert got[2] == pytest.approx([0.0, 0.0])
    # GRPO: group 0 G0 = [1.26, 0]: mean 0.63, std |1.26 - 0| / sqrt(2) = 0.890955
    got = step_advantages(returns, [0, 0, 1], ESTIMATORS["grpo"], eps=0.0)
    s = 1.26 / math.sqrt(2)
    assert got[0] == pytest.approx([0.63 / s, 0.77 / s, 0.37 / s], rel=1e-5)
    assert got[1] == pytest.approx([-0.63 / s], rel=1e-5)


def test_step_advantages_skip_empty_trajectories_and_sparse_group_ids() -> None:
    # the empty trajectory takes no part: group 7 is then [2.0] and [0.0] -> dr_grpo b = 1
    got = step_advantages([[2.0, 2.0], [], [0.0]], [7, 7, 7], "dr_grpo")
    assert got == [[1.0, 1.0], [], [-1.0]]
    with pytest.raises(ValueError, match="one group index per trajectory"):
        step_advantages([[1.0]], [0, 1], "grpo")


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_step_advantages_equal_trajectory_advantages_when_broadcast(name: str) -> None:
    finals = [1.0, 0.0, 0.5, 1.0, 0.0, 0.25, 3.0]
    groups = [0, 0, 0, 1, 1, 1, 2]
    lengths = [1, 3, 2, 4, 1, 2, 2]
    returns = [discounted_returns([None] * n, f, 1.0) for n, f in zip(lengths, finals)]
    got = step_advantages(returns, groups, name)
    expected = ESTIMATORS[name](torch.tensor(finals), torch.tensor(groups)).tolist()
    for steps, n, a in zip(got, lengths, expected):
        assert steps == [a] * n  # exactly, not approximately
