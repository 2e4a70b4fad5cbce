"""Traces recorded without a gateway: steps keep their messages and are tokenized on demand."""

from __future__ import annotations

import pytest
from spanfactory import framework_llm_span, gateway_span

from tracerl.core.convert import episode_from_spans
from tracerl.core.types import TerminationReason
from tracerl.trainers.retokenize import retokenize


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from tracerl.models import tiny_model_path

    return AutoTokenizer.from_pretrained(tiny_model_path())


def test_steps_without_ids_are_tokenized_with_the_chat_template_and_flagged(tokenizer):
    ep = episode_from_spans([framework_llm_span("The answer is 5.", 0)])
    assert ep.termination_reason is TerminationReason.MISSING_TOKEN_IDS
    out = retokenize(ep, tokenizer)
    (step,) = out.steps
    assert step.retokenized and step.response_logprobs is None
    assert step.prompt_ids == list(tokenizer.apply_chat_template(
        [{"role": "user", "content": "question"}], add_generation_prompt=True, tokenize=True, return_dict=False))
    assert tokenizer.decode(step.response_ids, skip_special_tokens=True) == "The answer is 5."
    assert step.response_ids[-1] == tokenizer.eos_token_id
    (seq,) = out.trajectories[0].sequences
    assert sum(seq.mask) == len(step.response_ids) and seq.logprobs is None
    assert out.termination_reason is TerminationReason.SUCCESS
    assert out.metrics["convert/retokenized_steps"] == 1
    assert ep.steps[0].prompt_ids is None  # the input episode is not modified


def test_steps_with_gateway_ids_are_never_retokenized(tokenizer):
    gw = gateway_span([{"role": "user", "content": "q"}], "r", seq=0, start=0)
    ep = episode_from_spans([gw])
    out = retokenize(ep, tokenizer)
    assert out.steps[0].prompt_ids == ep.steps[0].prompt_ids and not out.steps[0].retokenized
