"""One RL step on a GPU, tracerl against TRL's GRPOTrainer: rollout tokens/s, update tokens/s, MFU.

    python bench/gpu_step.py [--out runs/gpu-step] [--modes ...] [--trl-python PY]
    python bench/gpu_step.py --check      # the same path in about a minute: a tiny config (CPU without CUDA)

Nothing is downloaded: the model is a Qwen2-architecture config of ~0.5B parameters (Qwen2.5-0.5B's
shapes: 24 layers, hidden 896, 14/2 heads, MLP 4864, vocabulary 151,936, tied embeddings) with
random weights (seed 0), saved as a Hugging Face folder with a word-level tokenizer built here
(token ``tN`` is id N, so a prompt of 128 words is 128 tokens; tracerl's side passes token ids, TRL
gets the text and this tokenizer object, as AutoTokenizer would rebuild a Qwen2 BPE one from it). The batch: 8 prompts of 128
tokens, 8 samples each (64 sequences), up to 256 new tokens at temperature 1, bf16.

Contestants, each in its own process, one after the other:
  tracerl / tracerl-ckpt   TorchEngine (bfloat16) generates the 64 samples (one warm-up batch first);
                           then policy_update on them (bf16-mixed: float32 weights and AdamW, bfloat16
                           autocast), one warm-up step and two timed; -ckpt with activation checkpointing
  trl / trl-ckpt           GRPOTrainer (use_vllm off: HF generate) on the same prompts and sizes, bf16,
                           three steps, the first as warm-up; rollout = its timed
                           _generate_and_score_completions, update = the rest of the step
  memory-1.5b              tracerl's full update (AdamW, bf16-mixed, checkpointing) of Qwen2.5-1.5B's
                           shapes next to a bfloat16 TorchEngine of the same model: peak GPU memory

MFU counts model FLOPs only (a recomputed forward is not counted): 6 x (matmul parameters,
the tied output layer included) per token plus causal attention, 6 x layers x hidden x length
per token, against the device's dense bf16 peak (H100/H200: 989 TFLOP/s). Writes results.json
and report.md (the table) under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHAPES = {  # Qwen2 configs: name -> (layers, hidden, heads, kv heads, mlp, vocabulary)
    "0.5b": (24, 896, 14, 2, 4864, 151_936),
    "1.5b": (28, 1536, 12, 2, 8960, 151_936),
    "check": (2, 64, 4, 2, 128, 2048),
}
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}
MODES = ["tracerl", "tracerl-ckpt", "trl", "trl-ckpt", "memory-1.5b"]


def make_model(shape: str, folder: Path) -> Path:
    """A random-weight Qwen2 model and its word-level tokenizer in ``folder`` (made once)."""
    if (folder / "config.json").is_file():
        return folder
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    layers, hidden, heads, kv, mlp, vocab = SHAPES[shape]
    specials = ["<pad>", "<|im_start|>", "<|im_end|>", "<unk>"]
    words = {w: i for i, w in enumerate(specials)} | {f"t{i}": i for i in range(len(specials), vocab)}
    tok = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>",
                                   bos_token="<|im_start|>", unk_token="<unk>")
    fast.chat_template = ("{% for m in messages %}<|im_start|> {{ m['content'] }} <|im_end|> {% endfor %}"
                          "{% if add_generation_prompt %}<|im_start|> {% endif %}")
    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=4096,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def model_flops_per_token(model_dir: Path, length: float) -> float:
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(model_dir)
    head = c.hidden_size // c.num_attention_heads
    attn = c.hidden_size * head * (c.num_attention_heads * 2 + c.num_key_value_heads * 2)
    per_layer = attn + 3 * c.hidden_size * c.intermediate_size
    matmul = c.num_hidden_layers * per_layer + c.vocab_size * c.hidden_size  # + the output layer
    return 6.0 * matmul + 6.0 * c.num_hidden_layers * c.hidden_size * length


def device_facts() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"device": "cpu", "peak_tflops": None}
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    return {"device": name, "peak_tflops": peak}


def prompts(job: dict) -> list[list[int]]:
    import random

    rng = random.Random(0)
    vocab = SHAPES[job["shape"]][5]
    return [[rng.randrange(4, vocab) for _ in range(job["prompt_tokens"])] for _ in range(job["prompts"])]


# --- tracerl ----------------------------------------------------------------------------------

def tracerl_rollout(job: dict, model_dir: Path) -> tuple[list, float]:
    import asyncio

    from tracerl.engines.base import SamplingParams
    from tracerl.engines.torch_engine import TorchEngine

    engine = TorchEngine(str(model_dir), dtype="bfloat16", max_batch_size=job["prompts"] * job["group"],
                         batch_window_ms=50)

    async def batch(max_tokens: int) -> list:
        params = SamplingParams(max_tokens=max_tokens, temperature=1.0, n=job["group"], seed=0)
        return await asyncio.gather(*(engine.generate(p, params) for p in prompts(job)))

    asyncio.run(batch(job["max_tokens"]))  # warm-up: kernels, allocator, the compiled decode step
    _sync()
    t0 = time.perf_counter()
    out = asyncio.run(batch(job["max_tokens"]))
    _sync()
    seconds = time.perf_counter() - t0
    engine.shutdown()
    return [(p, g) for p, gens in zip(prompts(job), out) for g in gens], seconds


def tracerl_worker(job: dict, mode: str, model_dir: Path) -> dict:
    import random

    import torch

    from tracerl.trainers.batching import Row
    from tracerl.trainers.config import TrainConfig
    from tracerl.trainers.policy import load_policy
    from tracerl.trainers.update import policy_update

    device = "cuda" if torch.cuda.is_available() else "cpu"
    samples, rollout_s = tracerl_rollout(job, model_dir)
    rng = random.Random(0)
    rows = []
    for prompt, gen in samples:
        ids = prompt + gen.token_ids
        mask = [0] * (len(prompt) - 1) + [1] * len(gen.token_ids)
        adv = rng.choice((-1.0, 1.0))
        rows.append(Row(ids[:-1], ids[1:], mask, [adv * m for m in mask],
                        [0.0] * (len(prompt) - 1) + list(gen.logprobs)))
    cfg = TrainConfig.model_validate({"precision": "bf16-mixed", "gradient_checkpointing": mode.endswith("ckpt"),
                                      "device": device, "steps": 3, "optim": {"lr": 1e-6, "warmup_steps": 0},
                                      "output": str(Path(job["out"]) / mode)})
    policy = load_policy(cfg, str(model_dir), None, device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        policy_update(policy.model, policy.optimizer, policy.scheduler, rows, cfg, temperature=1.0)
        _sync()
        times.append(time.perf_counter() - t0)
    tokens = sum(len(r) for r in rows)
    return {"rollout_tokens": sum(len(g.token_ids) for _, g in samples), "rollout_s": rollout_s,
            "update_tokens": tokens, "update_s": sum(times[1:]) / 2, "mean_length": tokens / len(rows),
            "peak_gib": _peak_gib()}


def memory_worker(job: dict, model_dir: Path) -> dict:
    """The 1.5B full update next to its engine: does it fit, and how much room is left."""
    import random

    import torch

    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.trainers.batching import Row
    from tracerl.trainers.config import TrainConfig
    from tracerl.trainers.policy import load_policy
    from tracerl.trainers.update import policy_update

    device = "cuda" if torch.cuda.is_available() else "cpu"
    engine = TorchEngine(str(model_dir), dtype="bfloat16", max_batch_size=8)
    cfg = TrainConfig.model_validate({"precision": "bf16-mixed", "gradient_checkpointing": True, "device": device,
                                      "steps": 2, "output": str(Path(job["out"]) / "memory-1.5b")})
    policy = load_policy(cfg, str(model_dir), None, device)
    rng = random.Random(0)
    vocab, length = SHAPES["1.5b"][5], job["prompt_tokens"] + job["max_tokens"]
    rows = []
    for _ in range(job["prompts"] * job["group"]):
        ids = [rng.randrange(4, vocab) for _ in range(length + 1)]
        mask = [0] * job["prompt_tokens"] + [1] * job["max_tokens"]
        rows.append(Row(ids[:-1], ids[1:], mask, [rng.choice((-1.0, 1.0)) * m for m in mask], None))
    t0 = time.perf_counter()
    for _ in range(2):
        policy_update(policy.model, policy.optimizer, policy.scheduler, rows, cfg)
    _sync()
    free = torch.cuda.mem_get_info()[0] / 2**30 if device == "cuda" else None
    engine.shutdown()
    return {"update_tokens": sum(len(r) for r in rows), "update_s": (time.perf_counter() - t0) / 2,
            "peak_gib": _peak_gib(), "free_gib_after": free,
            "parameters": sum(p.numel() for p in policy.model.parameters())}


# --- TRL (imports no tracerl: it may run in TRL's own environment) ---------------------------

def trl_worker(job: dict, mode: str, model_dir: Path) -> dict:
    import random

    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    steps: list[dict] = []

    class Timed(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):  # sampling, rewards, advantages: the rollout
            _sync()
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            _sync()
            steps.append({"rollout_s": time.perf_counter() - t0, "rollout_tokens": int(out["completion_mask"].sum()),
                          "update_tokens": int(out["prompt_mask"].sum() + out["completion_mask"].sum())})
            return out

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            _sync()
            steps[-1]["update_s"] = time.perf_counter() - self.t0 - steps[-1]["rollout_s"]

    rng = random.Random(1)

    def reward(completions, **_):
        return [rng.choice((0.0, 1.0)) for _ in completions]

    text = [" ".join(f"t{i}" for i in p) for p in prompts(job)]
    n = job["prompts"] * job["group"]
    cuda = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=str(Path(job["out"]) / mode), max_steps=3, per_device_train_batch_size=n,
        gradient_accumulation_steps=1, num_generations=job["group"], num_iterations=1, shuffle_dataset=False,
        max_completion_length=job["max_tokens"], temperature=1.0, top_p=1.0, top_k=0, learning_rate=1e-6,
        lr_scheduler_type="constant", warmup_steps=0, beta=0.0, loss_type="dapo", use_vllm=False,
        bf16=cuda, use_cpu=not cuda, gradient_checkpointing=mode.endswith("ckpt"),
        model_init_kwargs={"dtype": "float32"}, report_to="none", logging_steps=1, disable_tqdm=True,
        save_strategy="no", dataloader_num_workers=0,
    )
    data = Dataset.from_list([{"prompt": t} for t in text] * 3)
    trainer = Timed(model=str(model_dir), reward_funcs=reward, args=config, train_dataset=data,
                    processing_class=word_tokenizer(model_dir), callbacks=[Clock()])
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    timed = steps[1:]
    mean = {k: sum(s[k] for s in timed) / len(timed) for k in timed[0]}
    return {**mean, "mean_length": mean["update_tokens"] / n, "peak_gib": _peak_gib()}


def word_tokenizer(model_dir: Path):
    """The word-level tokenizer as built (AutoTokenizer would rebuild a Qwen2 BPE one from it)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"), pad_token="<pad>",
                                   eos_token="<|im_end|>", bos_token="<|im_start|>", unk_token="<unk>")


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_gib() -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None


# --- the parent: models, contestants, the table ------------------------------------------------

def run(mode: str, job: dict, python: str, model_dir: Path, timeout_s: float) -> dict:
    out = Path(job["out"]) / f"{mode}.json"
    command = [python, __file__, "--worker", mode, "--job", json.dumps(job), "--model-dir", str(model_dir),
               "--result", str(out)]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, "PYTHONPATH": f"{REPO}:{os.environ.get('PYTHONPATH', '')}"})
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout_s:.0f} s"}
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]}
    return {**json.loads(out.read_text()), "process_s": time.perf_counter() - t0}


def table(results: dict, facts: dict, flops: float) -> str:
    lines = [f"device: {facts['device']}; model: {facts['shape']} Qwen2 (random weights); batch {facts['batch']}",
             "", "| contestant | rollout tok/s | update tok/s | update MFU | peak GiB |", "|---|---|---|---|---|"]
    for mode, r in results.items():
        if "error" in r:
            lines.append(f"| {mode} | failed: {r['error']} | | | |")
            continue
        roll = f"{r['rollout_tokens'] / r['rollout_s']:,.0f}" if r.get("rollout_s") else "-"
        upd = r["update_tokens"] / r["update_s"]
        mfu = (f"{100 * upd * flops / (facts['peak_tflops'] * 1e12):.1f} %"
               if facts.get("peak_tflops") and not mode.startswith("memory") else "-")
        peak = f"{r['peak_gib']:.1f}" if r.get("peak_gib") is not None else "-"
        if r.get("free_gib_after") is not None:
            peak += f" ({r['free_gib_after']:.0f} free)"
        lines.append(f"| {mode} | {roll} | {upd:,.0f} | {mfu} | {peak} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="a tiny config, to see the whole path run")
    ap.add_argument("--modes", nargs="+", default=None, choices=MODES)
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "gpu-step")
    ap.add_argument("--trl-python", default=sys.executable, help="the Python that has TRL (default: this one)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per contestant")
    ap.add_argument("--make-model", choices=sorted(SHAPES), help="only build that model folder under --out and "
                    "print its path (bench/gpu_check.sh trains on it)")
    ap.add_argument("--worker"), ap.add_argument("--job"), ap.add_argument("--model-dir"), ap.add_argument("--result")
    args = ap.parse_args()
    if args.make_model:
        print(make_model(args.make_model, args.out / f"model-{args.make_model}"))
        return
    if args.worker:
        job, model_dir = json.loads(args.job), Path(args.model_dir)
        if args.worker.startswith("trl"):
            result = trl_worker(job, args.worker, model_dir)
        elif args.worker == "memory-1.5b":
            result = memory_worker(job, model_dir)
        else:
            result = tracerl_worker(job, args.worker, model_dir)
        Path(args.result).write_text(json.dumps(result))
        return
    shape = "check" if args.check else "0.5b"
    job = {"shape": shape, "prompts": 2 if args.check else 8, "group": 2 if args.check else 8,
           "prompt_tokens": 16 if args.check else 128, "max_tokens": 16 if args.check else 256, "out": str(args.out)}
    modes = args.modes or (["tracerl", "tracerl-ckpt", "trl"] if args.check else MODES)
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir = make_model(shape, args.out / f"model-{shape}")
    facts = {**device_facts(), "shape": shape, "batch": f"{job['prompts']} prompts x {job['group']}, "
             f"{job['prompt_tokens']} + up to {job['max_tokens']} tokens"}
    results = {}
    for mode in modes:
        python = args.trl_python if mode.startswith("trl") else sys.executable
        folder = make_model("check" if args.check else "1.5b", args.out / "model-1.5b") if mode == "memory-1.5b" \
            and not args.check else model_dir
        results[mode] = run(mode, job, python, folder, args.timeout)
        print(mode, json.dumps(results[mode]), flush=True)
    flops = model_flops_per_token(model_dir, job["prompt_tokens"] + job["max_tokens"])
    report = table(results, facts, flops)
    (args.out / "results.json").write_text(json.dumps({"facts": facts, "job": job, "results": results}, indent=2))
    (args.out / "report.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
