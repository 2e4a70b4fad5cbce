"""Token ids for steps that have none, or another model's: tokenize with the policy's template.

Steps recorded without a gateway (an app calling a hosted model) carry messages but no token
ids, and steps recorded by a gateway serving another model (a teacher whose traces train a
student) carry that model's ids, which mean nothing to the policy: each gateway span names its
tokenizer (``Step.tokenizer``, a fingerprint of vocabulary, special tokens and chat template),
and ids past the policy's vocabulary are foreign whatever the span says. For SFT/RFT on such
traces the trainer renders them with its own tokenizer's chat template: the prompt is the
template of the input messages with the generation prompt, the response is what the template
appends for the output message. These steps are flagged ``retokenized=True`` and have no
logprobs: they are fine for supervised losses, not for importance ratios (ARCHITECTURE: never
re-tokenize text whose token ids are the policy's own, so those steps are left untouched).
"""

from __future__ import annotations

import json
from typing import Any

from tracerl.core.sequences import build_sequences, link_callers
from tracerl.core.types import Episode, Message, Step, TerminationReason


def _chat(messages: list[Message]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        doc: dict[str, Any] = {"role": m.role, "content": m.content or ""}
        if m.tool_calls:
            doc["tool_calls"] = [
                {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": _args(tc.arguments)}}
                for tc in m.tool_calls
            ]
        if m.tool_call_id:
            doc["tool_call_id"] = m.tool_call_id
        if m.name:
            doc["name"] = m.name
        out.append(doc)
    return out


def _args(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _ids(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]], generation: bool) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation,
                                        tokenize=True, return_dict=False)
    return list(ids)


def foreign(step: Step, tokenizer: Any, fingerprint: str) -> bool:
    """Whether ``step``'s token ids were made by another tokenizer than ``tokenizer`` (whose
    :func:`~tracerl.engines.base.tokenizer_fingerprint` is ``fingerprint``)."""
    if not step.has_tokens:
        return False
    if step.tokenizer is not None and step.tokenizer != fingerprint:
        return True
    return max([*(step.prompt_ids or ()), *(step.response_ids or ())], default=-1) >= len(tokenizer)


def retokenize_step(step: Step, tokenizer: Any, fingerprint: str | None = None) -> Step:
    """A copy of ``step`` with prompt/response ids from ``tokenizer``'s chat template, when it
    has none or (given ``fingerprint``, the tokenizer's) another tokenizer's."""
    mine = step.has_tokens and (fingerprint is None or not foreign(step, tokenizer, fingerprint))
    if mine or step.output_message is None:
        return step
    chat = _chat(step.input_messages)
    prompt = _ids(tokenizer, chat, step.tools, generation=True)
    full = _ids(tokenizer, chat + _chat([step.output_message]), step.tools, generation=False)
    if full[: len(prompt)] == prompt:
        response = full[len(prompt):]
    else:  # a template that renders history differently: encode the reply on its own
        text = step.output_message.content or ""
        response = list(tokenizer.encode(text, add_special_tokens=False)) + [tokenizer.eos_token_id]
    # Templates usually end a turn with EOS plus a newline; the model stops at EOS.
    eos = tokenizer.eos_token_id
    if eos in response:
        response = response[: response.index(eos) + 1]
    return step.model_copy(update={"prompt_ids": prompt, "response_ids": response, "response_logprobs": None,
                                   "retokenized": True, "tokenizer": fingerprint})


def retokenize(episode: Episode, tokenizer: Any, fingerprint: str | None = None) -> Episode:
    """A copy of ``episode`` in which every step without ids, or (given ``fingerprint``) with
    another tokenizer's, got them from ``tokenizer``."""
    trajectories = []
    for traj in episode.trajectories:
        steps = [retokenize_step(s, tokenizer, fingerprint) for s in traj.steps]
        sequences, breaks = build_sequences(steps)
        trajectories.append(traj.model_copy(update={"steps": steps, "sequences": sequences, "prefix_breaks": breaks}))
    link_callers(trajectories)
    reason = episode.termination_reason
    if reason is TerminationReason.MISSING_TOKEN_IDS and all(s.has_tokens for t in trajectories for s in t.steps):
        reason = TerminationReason.SUCCESS
    metrics = dict(episode.metrics)
    metrics["convert/retokenized_steps"] = float(sum(s.retokenized for t in trajectories for s in t.steps))
    return episode.model_copy(update={"trajectories": trajectories, "termination_reason": reason, "metrics": metrics})
