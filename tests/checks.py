"""Checks shared by tests on different models."""

from __future__ import annotations


def trainer_and_engine_logprobs(engine, model, content: str, *, temperature: float, max_tokens: int,
                                seed: int):
    """(the trainer's log-probs of one sampled reply to ``content``, the engine's): the two
    sides of the importance ratio, which must start equal."""
    import torch

    from tracerl.engines.base import SamplingParams
    from tracerl.trainers.losses import token_logprobs

    prompt = list(engine.tokenizer.apply_chat_template([{"role": "user", "content": content}],
                                                       add_generation_prompt=True, tokenize=True, return_dict=False))
    gen = engine.generate_sync(prompt, SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed))[0]
    ids = torch.tensor([prompt + gen.token_ids])
    with torch.no_grad():
        lp = token_logprobs(model(input_ids=ids[:, :-1]).logits, ids[:, 1:], temperature=temperature)
    return lp[0, len(prompt) - 1:], torch.tensor(gen.logprobs)
