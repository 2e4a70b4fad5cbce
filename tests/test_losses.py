"""Policy, SFT, log-prob and entropy losses against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from tracerl.trainers.losses import (
    AGG_MODES,
    entropy,
    loss_normalizer,
    policy_loss,
    sft_loss,
    token_logprobs,
)

LN2 = math.log(2.0)


def leaf(values: list[list[float]]) -> torch.Tensor:
    return torch.tensor(values, requires_grad=True)


def test_clip_is_asymmetric_and_pessimistic() -> None:
    # old = 0, so ratio = exp(lp). Per token: -A * ratio vs -A * clip(ratio, 0.8, 1.28), max:
    #   t0  A=+1 ratio 1.5   max(-1.5, -1.28)  = -1.28  clipped (upper, 1 + 0.28)
    #   t1  A=-1 ratio 0.5   max( 0.5,  0.8 )  =  0.8   clipped (lower, 1 - 0.2)
    #   t2  A=+1 ratio 1.25  max(-1.25, -1.25) = -1.25  not clipped (a symmetric 0.2 would)
    #   t3  A=-1 ratio 0.78  max( 0.78, 0.8 )  =  0.8   clipped
    #   t4  A=+1 ratio 0.5   max(-0.5, -0.8)   = -0.5   not clipped (pessimistic side)
    # token_mean = (-1.28 + 0.8 - 1.25 + 0.8 - 0.5) / 5 = -1.43 / 5 = -0.286
    ratios = [1.5, 0.5, 1.25, 0.78, 0.5]
    lp = leaf([[math.log(r) for r in ratios]])
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, 1.0]])
    loss, m = policy_loss(lp, torch.zeros(1, 5), adv, torch.ones(1, 5))
    assert loss.item() == pytest.approx(-0.286)
    assert m["loss/policy"] == pytest.approx(-0.286)
    assert m["stats/clip_frac"] == pytest.approx(3 / 5)
    assert m["stats/ratio_mean"] == pytest.approx((1.5 + 0.5 + 1.25 + 0.78 + 0.5) / 5)
    assert m["stats/tis_weight_mean"] == 1.0 and m["loss/kl"] == 0.0
    loss.backward()
    # d/dlp (-A * exp(lp)) / 5 = -A * ratio / 5 where unclipped, 0 where clipped
    assert lp.grad is not None
    assert lp.grad[0].tolist() == pytest.approx([0.0, 0.0, -1.25 / 5, 0.0, -0.5 / 5])


# ratio 1 everywhere (lp = old = 0), so the per-token loss is -A:
#   seq 0: tokens -1, -2 (n = 2);  seq 1: token -4 (n = 1);  seq 2: no tokens
ADV = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
BY_HAND = {
    "token_mean": -7 / 3,  # (-1 - 2 - 4) / 3 tokens
    "seq_mean_token_mean": -2.75,  # (-1.5 + -4) / 2 sequences with tokens
    "seq_mean_token_sum": -3.5,  # (-3 + -4) / 2 sequences with tokens
    "constant": -7 / 12,  # -7 / (B=3 * max_tokens=4)
}


@pytest.mark.parametrize("agg", AGG_MODES)
def test_aggregation_modes(agg: str) -> None:
    lp = torch.zeros(3, 3, requires_grad=True)
    loss, _ = policy_loss(lp, torch.zeros(3, 3), ADV, MASK, agg=agg, max_tokens=4)  # type: ignore[arg-type]
    assert loss.item() == pytest.approx(BY_HAND[agg])


def test_sequence_advantages_broadcast_over_tokens() -> None:
    lp = torch.zeros(2, 3, requires_grad=True)
    per_seq, _ = policy_loss(lp, torch.zeros(2, 3), torch.tensor([1.0, -2.0]), MASK[:2])
    per_tok, _ = policy_loss(lp, torch.zeros(2, 3), torch.tensor([[1.0] * 3, [-2.0] * 3]), MASK[:2])
    # (-1 - 1 + 2) / 3 = 0
    assert per_seq.item() == pytest.approx(0.0) and per_tok.item() == pytest.approx(0.0)
    # token_mean with a supplied normalizer divides by it instead of the 3 tokens
    scaled, _ = policy_loss(
        lp, torch.zeros(2, 3), torch.tensor([1.0, 1.0]), MASK[:2], normalizer=6.0
    )
    assert scaled.item() == pytest.approx(-3 / 6)


def test_constant_needs_max_tokens_and_agg_must_be_known() -> None:
    lp = torch.zeros(1, 2, requires_grad=True)
    with pytest.raises(ValueError, match="max_tokens is required"):
        policy_loss(lp, torch.zeros(1, 2), torch.ones(1), torch.ones(1, 2), agg="constant")
    with pytest.raises(ValueError, match="choose one of token_mean"):
        policy_loss(lp, torch.zeros(1, 2), torch.ones(1), torch.ones(1, 2), agg="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shapes disagree"):
        policy_loss(lp, torch.zeros(1, 2), torch.ones(1), torch.ones(1, 3))


def test_truncated_importance_sampling() -> None:
    # w = exp(old - engine) = exp(0 - ln 0.25) = 4 and exp(0 - ln 2) = 0.5; cap 2 -> [2, 0.5]
    # A = 1, ratio 1: per-token loss -w, token_mean = (-2 - 0.5) / 2 = -1.25
    engine = torch.tensor([[math.log(0.25), LN2]])
    lp = torch.zeros(1, 2, requires_grad=True)
    old = torch.zeros(1, 2, requires_grad=True)  # even if a caller forgets to detach it
    loss, m = policy_loss(lp, old, torch.ones(1), torch.ones(1, 2), engine_logprobs=engine)
    assert loss.item() == pytest.approx(-1.25)
    assert m["stats/tis_weight_mean"] == pytest.approx(1.25)
    # the trainer-vs-engine gap, reported uncapped: |0 - ln 0.25| and |0 - ln 2|; largest w = 4
    assert m["stats/engine_logprob_gap_mean"] == pytest.approx((math.log(4) + LN2) / 2)
    assert m["stats/engine_ratio_max"] == pytest.approx(4.0)
    loss.backward()
    # w is detached: d/dlp (-w * exp(lp)) / 2 = -w / 2, and nothing flows into old or w
    assert lp.grad is not None and lp.grad[0].tolist() == pytest.approx([-1.0, -0.25])
    assert old.grad is None
    # no cap: (-4 - 0.5) / 2
    loss, m = policy_loss(
        lp, torch.zeros(1, 2), torch.ones(1), torch.ones(1, 2), engine_logprobs=engine, tis_cap=None
    )
    assert loss.item() == pytest.approx(-2.25) and m["stats/tis_weight_mean"] == pytest.approx(2.25)


def test_kl_k3() -> None:
    # lp = 0; ref = ln 2 and ln 0.5, so d = ref - lp = +-ln 2
    # k3 = e^d - d - 1: 2 - 0.693147 - 1 = 0.306853;  0.5 + 0.693147 - 1 = 0.193147; mean 0.25
    # A = 0, so the loss is kl_beta * 0.25 = 0.025
    ref = torch.tensor([[LN2, -LN2]])
    lp = torch.zeros(1, 2, requires_grad=True)
    loss, m = policy_loss(
        lp, torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), ref_logprobs=ref, kl_beta=0.1
    )
    assert loss.item() == pytest.approx(0.025)
    assert m["loss/kl"] == pytest.approx(0.25)
    assert m["loss/policy"] == pytest.approx(0.0)
    loss.backward()
    # d k3 / d lp = 1 - e^d: 1 - 2 = -1 and 1 - 0.5 = 0.5; times 0.1 / 2 tokens
    assert lp.grad is not None and lp.grad[0].tolist() == pytest.approx([-0.05, 0.025])
    _, m = policy_loss(lp, torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), ref_logprobs=ref)
    assert m["loss/kl"] == 0.0  # kl_beta = 0: not computed


@pytest.mark.parametrize("agg", AGG_MODES)
def test_all_zero_mask_gives_zero_loss_with_grad(agg: str) -> None:
    # padding garbage under the mask must not leak NaN/inf (exp(1e4) overflows)
    lp = torch.full((2, 3), 1e4, requires_grad=True)
    loss, m = policy_loss(
        lp,
        torch.zeros(2, 3),
        torch.ones(2),
        torch.zeros(2, 3),
        agg=agg,
        max_tokens=3,  # type: ignore[arg-type]
        ref_logprobs=torch.full((2, 3), -1e4),
        kl_beta=0.1,
        engine_logprobs=torch.full((2, 3), -1e4),
    )
    assert loss.item() == 0.0 and loss.grad_fn is not None
    assert not any(math.isnan(v) for v in m.values())
    loss.backward()
    assert lp.grad is not None and torch.equal(lp.grad, torch.zeros(2, 3))


@pytest.mark.parametrize("agg", AGG_MODES)
def test_gradient_accumulation_matches_one_batch(agg: str) -> None:
    gen = torch.Generator().manual_seed(0)
    B, T = 5, 6
    lp = (torch.randn(B, T, generator=gen) * 0.3 - 1.0).requires_grad_(True)
    old = lp.detach() + torch.randn(B, T, generator=gen) * 0.3
    ref = lp.detach() + torch.randn(B, T, generator=gen) * 0.3
    engine = old + torch.randn(B, T, generator=gen) * 0.5
    adv = torch.randn(B, generator=gen)
    mask = (torch.rand(B, T, generator=gen) > 0.4).float()
    mask[3] = 0.0  # an empty sequence in the second micro-batch
    kw = {"agg": agg, "max_tokens": T, "kl_beta": 0.05}

    def run(rows: slice, normalizer: float | None) -> torch.Tensor:
        loss, _ = policy_loss(
            lp[rows],
            old[rows],
            adv[rows],
            mask[rows],
            ref_logprobs=ref[rows],
            engine_logprobs=engine[rows],
            normalizer=normalizer,
            **kw,  # type: ignore[arg-type]
        )
        return loss

    full = run(slice(0, B), None)
    (full_grad,) = torch.autograd.grad(full, lp)
    norm = loss_normalizer(agg, [mask[:2], mask[2:]])
    parts = run(slice(0, 2), norm) + run(slice(2, B), norm)
    (parts_grad,) = torch.autograd.grad(parts, lp)
    assert parts.item() == pytest.approx(full.item(), abs=1e-6)
    assert torch.allclose(parts_grad, full_grad, atol=1e-7)
    assert full_grad.abs().sum() > 0  # the comparison is not vacuous


def test_loss_normalizer() -> None:
    masks = [MASK[:2], MASK[2:]]  # 3 tokens; 2 sequences with tokens; 3 sequences in all
    assert loss_normalizer("token_mean", masks) == 3.0
    assert loss_normalizer("seq_mean_token_mean", masks) == 2.0
    assert loss_normalizer("seq_mean_token_sum", masks) == 2.0
    assert loss_normalizer("constant", masks) == 3.0


def test_sft_loss() -> None:
    # -(ln 0.5 + ln 0.25) / 2 = (0.693147 + 1.386294) / 2 = 1.039721; the masked 99 is ignored
    lp = leaf([[math.log(0.5), math.log(0.25), 99.0]])
    loss, m = sft_loss(lp, torch.tensor([[1.0, 1.0, 0.0]]))
    assert loss.item() == pytest.approx(1.039721) and m["loss/sft"] == pytest.approx(1.039721)
    loss.backward()
    assert lp.grad is not None and lp.grad[0].tolist() == pytest.approx([-0.5, -0.5, 0.0])


def test_token_logprobs() -> None:
    # logits [0, 0, ln 2] -> softmax [1/4, 1/4, 1/2]
    logits = torch.tensor([[[0.0, 0.0, LN2], [0.0, 0.0, LN2]]])
    got = token_logprobs(logits, torch.tensor([[2, 0]]))
    assert got[0].tolist() == pytest.approx([math.log(0.5), math.log(0.25)])
    # temperature 2 on [0, 0, 2 ln 2] gives the same distribution
    got = token_logprobs(logits * 2, torch.tensor([[2, 0]]), temperature=2.0)
    assert got[0].tolist() == pytest.approx([math.log(0.5), math.log(0.25)])
    # bf16 logits come back as fp32 and match a plain log_softmax
    rnd = torch.randn(2, 4, 7, generator=torch.Generator().manual_seed(1)).bfloat16()
    tgt = torch.randint(0, 7, (2, 4), generator=torch.Generator().manual_seed(2))
    ref = torch.log_softmax(rnd.float(), -1).gather(-1, tgt[..., None]).squeeze(-1)
    out = token_logprobs(rnd, tgt)
    assert out.dtype == torch.float32 and torch.allclose(out, ref, atol=1e-6)


def test_entropy() -> None:
    # t0 uniform over 4: ln 4 = 2 ln 2
    # t1 probs [1/8, 1/8, 1/4, 1/2]: 2 * (1/8) * 3 ln 2 + (1/4) * 2 ln 2 + (1/2) ln 2 = 1.75 ln 2
    # t2 is masked out; mean over t0, t1 = 1.875 ln 2 = 1.299651
    logits = torch.tensor([[[0.0] * 4, [0.0, 0.0, LN2, 2 * LN2], [9.0, 0.0, 0.0, 0.0]]])
    assert entropy(logits, torch.tensor([[1.0, 1.0, 0.0]])) == pytest.approx(1.875 * LN2)
    assert entropy(logits, torch.zeros(1, 3)) == 0.0
