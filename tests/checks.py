"""Checks shared by tests on different models."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


QWEN_TEMPLATE = (Path(__file__).parent / "data" / "qwen2.5_chat_template.jinja").read_text()


def qwen_tokenizer() -> Any:
    """The bundled model's byte-level tokenizer (whose special tokens are Qwen's) with Qwen2.5's
    own chat template, which writes a model's tool call in a form of its own."""
    from transformers import AutoTokenizer

    from tracerl.models import tiny_model_path

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    tok.chat_template = QWEN_TEMPLATE
    return tok


class ScriptEngine:
    """An engine (tracerl.engines.base.Engine) that samples the given replies in turn: the
    gateway's side of a model that writes its tool calls as bare JSON."""

    model_name = "teacher"
    weight_version = 0
    max_context = 4096

    def __init__(self, tokenizer: Any, replies: list[str]):
        self.tokenizer, self.replies, self.prompts = tokenizer, list(replies), []

    async def generate(self, prompt_ids: list[int], params: Any) -> list[Any]:
        from tracerl.engines.base import Generation

        self.prompts.append(list(prompt_ids))
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ids = list(self.tokenizer.encode(self.replies.pop(0), add_special_tokens=False)) + [end]
        return [Generation(ids, [-0.25] * len(ids), "stop", 0, end)]

    def update_weights(self, state_dict: Any, version: int) -> None:
        pass

    async def close(self) -> None:
        pass
