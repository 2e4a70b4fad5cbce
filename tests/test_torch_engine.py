"""TorchEngine's two decoders agree: the static-cache one (fixed shapes, what CUDA compiles into
graphs) gives the dynamic one's tokens, logprobs and finish reasons, row for row."""

from __future__ import annotations

import pytest

from tracerl.engines.base import SamplingParams
from tracerl.engines.torch_engine import TorchEngine


@pytest.fixture(scope="module")
def engines():
    dynamic, static = TorchEngine(max_batch_size=8, batch_window_ms=200), TorchEngine(
        max_batch_size=8, batch_window_ms=200, static_cache=True)
    yield dynamic, static
    dynamic.shutdown()
    static.shutdown()


def _batch(engine: TorchEngine) -> list:
    tok = engine.tokenizer
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True,
                                       return_dict=False) for q in ("What is 2 + 3?", "What is 17 - 9? Think.", "Hi")]
    params = [SamplingParams(max_tokens=24, temperature=1.0, seed=1, n=2),  # n > 1: rows of one request
              SamplingParams(max_tokens=5, temperature=0.7, top_k=20, seed=2),  # finishes early: length
              SamplingParams(max_tokens=24, temperature=0.0)]
    futures = [engine.submit(list(p), sp) for p, sp in zip(prompts, params)]  # one batch of 4 rows
    return [f.result(timeout=60) for f in futures]


def test_static_cache_decoding_equals_dynamic(engines):
    dynamic, static = engines
    a, b, again = _batch(dynamic), _batch(static), _batch(static)  # the second reuses the first's cache
    assert static.batches == 2  # all rows decoded together (padded to 4, finished rows kept)
    for gens_a, gens_b in [*zip(a, b, strict=True), *zip(a, again, strict=True)]:
        for x, y in zip(gens_a, gens_b, strict=True):
            assert x.token_ids == y.token_ids
            assert x.finish_reason == y.finish_reason
            assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)
    assert len({len(g.token_ids) for gens in a for g in gens}) > 1  # rows ended at different steps
