"""Token in, token out across turns (tracerl.gateway.turns), and a teacher's token ids
re-tokenized for a student (tracerl.trainers.retokenize), through the real gateway.

The teacher's template is Qwen2.5's own (tests/data/qwen2.5_chat_template.jinja, read from
the Qwen2.5-Coder-0.5B GGUF), on the bundled model's byte-level tokenizer, whose special
tokens are Qwen's: ``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from checks import ScriptEngine, qwen_tokenizer
from openai import OpenAI

import tracerl
from tracerl.core.convert import episode_from_spans
from tracerl.engines.base import tokenizer_fingerprint
from tracerl.gateway.server import GatewayServer
from tracerl.models import tiny_model_path

TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "Evaluate an expression.",
          "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]
BARE_CALL = '```json\n{"name": "calculator", "arguments": {"expression": "37*41"}}\n```'


def _tool_episode(engine: Any, tmp_path: Path, tracing: Any, **server: Any) -> tracerl.Episode:
    """A calculator round trip as an app makes it: the call, the tool's answer, the final reply."""
    from tracerl.core.store import SpanStore

    store = SpanStore(tmp_path / "gw.db")
    settings = tracerl.RolloutSettings(gateway_url="")
    with GatewayServer(engine, store, **server) as gw, \
            tracerl.session("ep-1", settings=settings.model_copy(update={"gateway_url": gw.url}), tracing=tracing) as s:
        client = OpenAI(base_url=s.base_url, api_key="x")
        messages: list[dict[str, Any]] = [{"role": "system", "content": "Use the calculator."},
                                          {"role": "user", "content": "What is 37*41?"}]
        first = client.chat.completions.create(model="teacher", messages=messages, tools=TOOLS, temperature=0)
        call = first.choices[0].message
        assert call.tool_calls and call.content is None  # the bare JSON became a call
        messages.append(call.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": "1517"})
        client.chat.completions.create(model="teacher", messages=messages, tools=TOOLS, temperature=0)
    return episode_from_spans(store.spans(session_id="ep-1"), episode_id="ep-1")


def test_a_bare_json_tool_call_stays_one_sequence_with_masks_on_the_sampled_tokens(tmp_path, tracing):
    tok = qwen_tokenizer()
    engine = ScriptEngine(tok, [BARE_CALL, "The answer is 1517."])
    ep = _tool_episode(engine, tmp_path, tracing)
    (traj,) = ep.trajectories
    first, second = traj.steps
    # the second prompt continues the first prompt and the sampled ids, the bare JSON as written
    assert second.prompt_ids[: len(first.prompt_ids) + len(first.response_ids)] == first.prompt_ids + first.response_ids
    assert "```json" in tok.decode(second.prompt_ids) and "<tool_call>" not in tok.decode(second.prompt_ids[-40:])
    assert tok.decode(second.prompt_ids).endswith("1517\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    (seq,) = traj.sequences
    assert traj.prefix_breaks == 0 and seq.token_ids == second.prompt_ids + second.response_ids
    sampled = set()
    for start, end in seq.response_spans:
        sampled |= set(range(start, end))
    assert [i for i, m in enumerate(seq.mask) if m] == sorted(sampled)  # exactly the sampled tokens
    assert sum(seq.mask) == len(first.response_ids) + len(second.response_ids)
    assert first.tokenizer == second.tokenizer == tokenizer_fingerprint(tok)


def test_without_continuation_the_template_rerenders_the_call_and_the_prefix_breaks(tmp_path, tracing):
    tok = qwen_tokenizer()
    engine = ScriptEngine(tok, [BARE_CALL, "The answer is 1517."])
    ep = _tool_episode(engine, tmp_path, tracing, continue_tokens=False)
    (traj,) = ep.trajectories
    assert traj.prefix_breaks == 1 and len(traj.sequences) == 2
    assert "<tool_call>" in tok.decode(traj.steps[1].prompt_ids)  # Qwen's template's own form


def test_a_changed_history_is_rendered_in_full(tmp_path):
    from tracerl.gateway.turns import Turns

    tok = qwen_tokenizer()
    turns = Turns(tok)
    asked = [{"role": "user", "content": "Hi"}]
    prompt = list(tok.apply_chat_template(asked, add_generation_prompt=True, tokenize=True, return_dict=False))
    reply = list(tok.encode("Hello!", add_special_tokens=False)) + [tok.convert_tokens_to_ids("<|im_end|>")]
    turns.remember("s", asked, None, prompt, reply, {"role": "assistant", "content": "Hello!"})
    later = [*asked, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]
    assert turns.prompt("s", later, None)[: len(prompt) + len(reply)] == prompt + reply
    edited = [*asked, {"role": "assistant", "content": "Hello there!"}, {"role": "user", "content": "Bye"}]
    assert turns.prompt("s", edited, None) is None  # the app changed the model's turn
    assert turns.prompt("other", later, None) is None and turns.prompt("s", later, TOOLS) is None
    cut = reply[:-1]  # stopped by max_tokens: no turn end to continue after
    turns.remember("s", asked, None, prompt, cut, {"role": "assistant", "content": "Hello!"})
    assert turns.prompt("s", later, None) is None


@pytest.mark.slow
def test_a_random_weight_qwen2_model_behind_the_gateway_masks_exactly_the_sampled_tokens(tmp_path, tracing):
    """A real TorchEngine on a tiny random-weight Qwen2 with the teacher's template: two turns
    of a chat, one training sequence, the mask exactly on the sampled tokens."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tracerl.core.store import SpanStore
    from tracerl.engines.torch_engine import TorchEngine

    tok = qwen_tokenizer()
    folder = tmp_path / "qwen2-tiny"
    torch.manual_seed(0)
    Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                                 eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), tie_word_embeddings=False)
                     ).save_pretrained(folder)
    tok.save_pretrained(folder)
    engine = TorchEngine(folder, model_name="teacher")
    served = tokenizer_fingerprint(engine.tokenizer)  # as loaded from the folder (transformers picks the class)
    store = SpanStore(tmp_path / "gw.db")
    try:
        with GatewayServer(engine, store) as gw, \
                tracerl.session("ep-2", settings=tracerl.RolloutSettings(gateway_url=gw.url), tracing=tracing) as s:
            client = OpenAI(base_url=s.base_url, api_key="x")
            messages: list[dict[str, Any]] = [{"role": "user", "content": "What is 2+3?"}]
            for follow_up in ("Are you sure?", None):
                reply = client.chat.completions.create(model="teacher", messages=messages, max_tokens=12, seed=1,
                                                       tools=TOOLS, temperature=1.0)
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if follow_up:
                    messages.append({"role": "user", "content": follow_up})
    finally:
        engine.shutdown()
    ep = episode_from_spans(store.spans(session_id="ep-2"), episode_id="ep-2")
    (traj,) = ep.trajectories
    assert len(traj.steps) == 2 and all(s.has_tokens and s.tokenizer == served for s in traj.steps)
    # a random model's reply may run to max_tokens; then the next turn is rendered in full and may
    # start a sequence of its own: either way each sequence's mask is on its steps' sampled tokens
    for seq in traj.sequences:
        masked = [t for t, m in zip(seq.token_ids, seq.mask) if m]
        assert masked == [t for i in seq.step_indices for t in traj.steps[i].response_ids]
        assert seq.logprobs is not None and all(lp == 0.0 for lp, m in zip(seq.logprobs, seq.mask) if not m)
    assert sum(sum(seq.mask) for seq in traj.sequences) == sum(len(s.response_ids) for s in traj.steps)
    assert len(traj.sequences) == 1 + traj.prefix_breaks


def test_a_teachers_token_ids_are_retokenized_with_the_students_template(tmp_path, tracing):
    """--from-traces on another model's traces: each step's ids carry the teacher's tokenizer
    fingerprint, so the student's loader re-renders the messages with its own template; a step
    of the student's own gateway is left as it was recorded."""
    from transformers import AutoTokenizer

    from tracerl.trainers.retokenize import foreign
    from tracerl.trainers.rft import load_traces

    teacher = qwen_tokenizer()
    ep = _tool_episode(ScriptEngine(teacher, [BARE_CALL, "The answer is 1517."]), tmp_path, tracing)
    student = AutoTokenizer.from_pretrained(tiny_model_path())  # same vocabulary, another template
    mine = tokenizer_fingerprint(student)
    assert tokenizer_fingerprint(teacher) != mine and all(foreign(s, student, mine) for s in ep.steps)
    (loaded,) = load_traces(tmp_path / "gw.db", student)
    steps = loaded.trajectories[0].steps
    assert all(s.retokenized and s.tokenizer == mine and s.response_logprobs is None for s in steps)
    first = student.decode(steps[0].response_ids)
    assert first.startswith("<tool_call>") and '"37*41"' in first  # the student's own tool-call form
    asked = [m.model_dump(exclude_none=True, exclude={"tool_calls", "reasoning"}) for m in steps[0].input_messages]
    assert steps[0].prompt_ids == list(student.apply_chat_template(asked, tools=TOOLS, add_generation_prompt=True,
                                                                   tokenize=True, return_dict=False))
    (tmp_path / "own").mkdir()
    own = _tool_episode(ScriptEngine(student, ['<tool_call>{"name": "calculator", "arguments": '
                                              '{"expression": "37*41"}}</tool_call>', "The answer is 1517."]),
                        tmp_path / "own", tracing)
    assert not any(foreign(s, student, mine) for s in own.steps)
    (again,) = load_traces(tmp_path / "own" / "gw.db", student)
    assert [s.prompt_ids for s in again.steps] == [s.prompt_ids for s in own.steps]
    assert not any(s.retokenized for s in again.steps)
