"""The trainer and TorchEngine on CUDA. Skipped without a GPU; run on a lent device machine."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.timeout(300, method="thread")]  # a hung CUDA call fails, never holds the GPU


def _prompts(tok, n: int = 6) -> list[list[int]]:
    questions = [f"What is {i} + {i + 3}?" for i in range(n)]
    return [list(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True,
                                         return_dict=False)) for q in questions]


def test_compiled_static_decoding_gives_the_dynamic_decoders_tokens():
    """The CUDA default (static cache, compiled decode step) against the dynamic decoder, greedy
    and sampled with seeds: the same tokens, logprobs within bf16's noise."""
    from tracerl.engines.base import SamplingParams
    from tracerl.engines.torch_engine import TorchEngine

    static = TorchEngine(device="cuda", dtype="bfloat16", batch_window_ms=100)
    dynamic = TorchEngine(device="cuda", dtype="bfloat16", batch_window_ms=100, static_cache=False)
    try:
        assert static.static_cache and not dynamic.static_cache
        for params in (SamplingParams(max_tokens=24, temperature=0.0), SamplingParams(max_tokens=24, temperature=1.0, seed=3)):
            a = [f.result() for f in [static.submit(p, params) for p in _prompts(static.tokenizer)]]
            b = [f.result() for f in [dynamic.submit(p, params) for p in _prompts(dynamic.tokenizer)]]
            for (x,), (y,) in zip(a, b):
                same = sum(i == j for i, j in zip(x.token_ids, y.token_ids)) / max(len(x.token_ids), 1)
                assert same > 0.9  # bf16 kernels of other shapes may flip a near-tie
                n = next((k for k, (i, j) in enumerate(zip(x.token_ids, y.token_ids)) if i != j), len(x.token_ids))
                assert x.logprobs[:n] == pytest.approx(y.logprobs[:n], abs=5e-2)
    finally:
        static.shutdown()
        dynamic.shutdown()


def test_bf16_mixed_trainer_logprobs_match_the_bf16_engine(tmp_path):
    """What the engine_logprob_gap metrics watch: the update's bf16 autocast forward against the
    bf16 engine that sampled, on the bundled model (stated tolerance: mean |dlogprob| < 0.02)."""
    from tracerl.engines.base import SamplingParams
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.models import tiny_model_path
    from tracerl.trainers.config import TrainConfig
    from tracerl.trainers.losses import token_logprobs
    from tracerl.trainers.policy import load_policy
    from tracerl.trainers.precision import autocast

    engine = TorchEngine(device="cuda", dtype="bfloat16")
    cfg = TrainConfig.model_validate({"output": tmp_path, "precision": "bf16-mixed"})
    policy = load_policy(cfg, str(tiny_model_path()), None, "cuda")
    gaps = []
    try:
        for prompt in _prompts(engine.tokenizer):
            (gen,) = engine.generate_sync(prompt, SamplingParams(max_tokens=32, temperature=1.0, seed=0))
            ids = torch.tensor([prompt + gen.token_ids], device="cuda")
            with torch.no_grad(), autocast("bf16-mixed", "cuda"):
                logits = policy.model(input_ids=ids).logits
            mine = token_logprobs(logits[:, len(prompt) - 1:-1], ids[:, len(prompt):])[0]
            gaps += (mine.cpu() - torch.tensor(gen.logprobs)).abs().tolist()
    finally:
        engine.shutdown()
    assert sum(gaps) / len(gaps) < 0.02 and max(gaps) < 0.5
