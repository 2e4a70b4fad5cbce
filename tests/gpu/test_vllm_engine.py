"""VLLMEngine on a GPU. Skipped without CUDA or without the [gpu] extra (run on a lent device)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
# a hung CUDA or vLLM call fails its test (the thread method: it stops even a blocked C call)
# rather than holding the lent GPU for the whole session
pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.timeout(300, method="thread")]
vllm = pytest.importorskip("vllm", reason="not importable here")


@pytest.fixture(scope="module")
def engine():
    from tracerl.engines.vllm_engine import VLLMEngine
    from tracerl.models import tiny_model_path

    eng = VLLMEngine(str(tiny_model_path()), model_name="tracerl-tiny", gpu_memory_utilization=0.2,
                     enforce_eager=True)
    yield eng
    eng.shutdown()


async def test_generate_returns_ids_and_processed_logprobs(engine):
    from transformers import AutoModelForCausalLM

    from tracerl.engines.base import SamplingParams
    from tracerl.models import tiny_model_path

    tok = engine.tokenizer
    prompt = list(tok.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}],
                                          add_generation_prompt=True, tokenize=True, return_dict=False))
    (gen,) = await engine.generate(prompt, SamplingParams(max_tokens=16, temperature=0.8, seed=0))
    assert gen.token_ids and len(gen.logprobs) == len(gen.token_ids)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path()).cuda()
    ids = torch.tensor([prompt + gen.token_ids], device="cuda")
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    ref = torch.log_softmax(logits / 0.8, -1).gather(-1, torch.tensor(gen.token_ids, device="cuda")[:, None])[:, 0]
    assert torch.allclose(ref.cpu(), torch.tensor(gen.logprobs), atol=2e-2)


async def test_weight_update_changes_outputs_and_version(engine):
    from transformers import AutoModelForCausalLM

    from tracerl.engines.base import SamplingParams
    from tracerl.models import tiny_model_path

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    state = {k: torch.zeros_like(v) if "lm_head" in k or "embed" in k else v for k, v in model.state_dict().items()}
    await engine.update_weights_async(state, version=1)
    (gen,) = await engine.generate([1, 2, 3], SamplingParams(max_tokens=4, temperature=1.0, seed=0))
    assert gen.weight_version == 1


def test_sleep_then_update_serves_the_new_weights():
    """The colocated training order: sleep (memory freed), update (wakes), generate with the new
    weights; the returned logprobs are the new model's at the sampling temperature."""
    from tracerl.engines.vllm_engine import VLLMEngine
    from tracerl.models import tiny_model_path

    eng = VLLMEngine(str(tiny_model_path()), gpu_memory_utilization=0.2, enforce_eager=True, enable_sleep_mode=True,
                     bucket_bytes=1 << 20)  # several buckets even for the tiny model
    try:
        _sleep_update_generate(eng)
    finally:
        eng.shutdown()


def _sleep_update_generate(eng) -> None:
    from transformers import AutoModelForCausalLM

    from tracerl.engines.base import SamplingParams
    from tracerl.models import tiny_model_path

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path()).cuda()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.1)  # other weights, every one of them
    before = torch.cuda.mem_get_info()[0]
    eng.sleep()
    assert torch.cuda.mem_get_info()[0] > before  # the sleeper gave memory back
    eng.update_weights(model.state_dict(), 3)
    import asyncio

    prompt = [1, 2, 3, 4]
    (gen,) = asyncio.run(eng.generate(prompt, SamplingParams(max_tokens=8, temperature=0.9, seed=0)))
    assert gen.weight_version == 3
    ids = torch.tensor([prompt + gen.token_ids], device="cuda")
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    ref = torch.log_softmax(logits / 0.9, -1).gather(-1, torch.tensor(gen.token_ids, device="cuda")[:, None])[:, 0]
    assert torch.allclose(ref.cpu(), torch.tensor(gen.logprobs), atol=2e-2)
    # a second event loop, after the first closed: the engine's own loop still serves it
    (again,) = asyncio.run(eng.generate(prompt, SamplingParams(max_tokens=4, temperature=0.9, seed=0)))
    assert again.weight_version == 3
