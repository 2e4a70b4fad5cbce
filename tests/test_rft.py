"""Rejection-sampling fine-tuning: selection, and fine-tuning on exported traces without token ids."""

from __future__ import annotations

import json

import pytest
from spanfactory import framework_llm_span, reward_span

from tracerl.core.store import SpanStore
from tracerl.core.types import Episode, Step, Task, TokenSequence, Trajectory
from tracerl.trainers.config import RFT, TrainConfig
from tracerl.trainers.rft import select

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _ep(task: str, i: int, reward: float, name: str = "main") -> Episode:
    seq = TokenSequence(token_ids=[1, 2, 3], mask=[0, 1, 1])
    traj = Trajectory(name=name, steps=[Step(id=f"s{i}")], sequences=[seq])
    return Episode(id=f"{task}-{i}", task=Task(id=task), trajectories=[traj], reward=reward)


def test_select_keeps_the_best_passing_sample_per_group():
    eps = [_ep("a", 0, 0.5), _ep("a", 1, 1.0), _ep("a", 2, 1.0), _ep("b", 0, 0.0), _ep("c", 0, 2.0)]
    best = select(eps, RFT(min_reward=1.0), exclude=set())
    assert sorted(ep.id for ep, _ in best) == ["a-1", "c-0"]  # ties: the first
    every = select(eps, RFT(min_reward=0.5, best_of_group=False), exclude=set())
    assert sorted(ep.id for ep, _ in every) == ["a-0", "a-1", "a-2", "c-0"]


def _write_app_traces(path, n: int = 8, one_question: bool = False) -> None:
    """What an app with an adapter and no gateway exports: LLM spans with text only (no task id;
    episode i asks "question i", or all "question"), and the rewards it emitted in production."""
    store = SpanStore(str(path.with_suffix(".db")))
    records = []
    for i in range(n):
        trace = f"{i + 1:032x}"
        good = i % 2 == 0
        reply = "The answer is 5." if good else "I am not sure, sorry."
        records.append(framework_llm_span(reply, 1000 * i, trace=trace, question="question" if one_question else f"question {i}"))
        records.append(reward_span(1.0 if good else 0.0, 1000 * i + 500, session=f"app-{i}", trace=trace))
    store.add(records)
    store.export_jsonl(path)


def _reply_logprob(model, tok, reply: str) -> float:
    prompt = tok.apply_chat_template([{"role": "user", "content": "question"}], add_generation_prompt=True,
                                     tokenize=True, return_dict=False)
    full = tok.apply_chat_template([{"role": "user", "content": "question"}, {"role": "assistant", "content": reply}],
                                   tokenize=True, return_dict=False)
    ids = torch.tensor([full])
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
    targets = ids[0, 1:]
    return float(lp[torch.arange(len(targets)), targets][len(prompt) - 1:].sum())


def test_rft_from_exported_traces_without_token_ids(tmp_path):
    from opentelemetry.sdk.trace import TracerProvider
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tracerl.core.otel import setup_tracing
    from tracerl.models import tiny_model_path
    from tracerl.trainers.loop import train

    traces = tmp_path / "app.jsonl"
    _write_app_traces(traces, one_question=True)
    assert all("token" not in k for line in traces.read_text().splitlines() for k in json.loads(line).get("attributes", {}))
    # eight samples of one question (keyed by it: no task id), so every passing one, not the best
    cfg = TrainConfig.model_validate({
        "from_traces": traces, "algo": {"type": "rft", "best_of_group": False}, "steps": 4, "batch_size": 4,
        "eval_size": 0, "output": tmp_path / "run", "progress": False, "tensorboard": False, "optim": {"lr": 3e-3},
    })
    provider = TracerProvider()
    result = train(cfg, tracing=setup_tracing(use_store=False, tracer_provider=provider))
    provider.shutdown()
    assert [m["rft/offline_trajectories"] for m in result.history] == [4.0] * 4  # the 4 rewarded
    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    before = AutoModelForCausalLM.from_pretrained(tiny_model_path()).eval()
    after = AutoModelForCausalLM.from_pretrained(result.final_checkpoint).eval()
    kept_gain = _reply_logprob(after, tok, "The answer is 5.") - _reply_logprob(before, tok, "The answer is 5.")
    dropped_gain = _reply_logprob(after, tok, "I am not sure, sorry.") - _reply_logprob(before, tok, "I am not sure, sorry.")
    assert kept_gain > 1.0 and kept_gain > dropped_gain


def test_from_traces_trains_by_rft_and_refuses_another_algo(tmp_path):
    # recorded logprobs are an old policy's: rft is the default there, and another algo is refused
    assert TrainConfig.model_validate({"from_traces": tmp_path / "x.jsonl"}).algo.type == "rft"
    assert TrainConfig.model_validate({"from_traces": tmp_path / "x.jsonl", "algo": {"min_reward": 0.5}}).algo == \
        TrainConfig.model_validate({"algo": {"type": "rft", "min_reward": 0.5}}).algo
    with pytest.raises(ValueError, match="algo rft"):
        TrainConfig.model_validate({"from_traces": tmp_path / "x.jsonl", "algo": {"type": "grpo"}})
