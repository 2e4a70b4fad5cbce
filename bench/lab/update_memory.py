"""Peak memory and time of one policy update, by micro-batch token budget and precision.

    .venv/bin/python bench/lab/update_memory.py --model smollm2-135m --budgets 8192 2048 --precisions fp32 bf16-mixed
    .venv/bin/python bench/lab/update_memory.py --model smollm2-135m --generation   # the engine, by dtype

Each configuration runs in a fresh process (peak resident memory is per process), on the same
64 random rows of 60-100 tokens (half response), with LoRA r=16 on every linear layer as the
real-model recipe trains. With a 49,152-token vocabulary the logits of one micro-batch are
tokens x 49,152 floats, and the loss keeps them for the backward pass.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(model: str, budget: int, precision: str, lora: bool) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, "bench")
    from trainer_throughput import make_rows

    from tracerl.trainers import lora as lora_mod
    from tracerl.trainers.config import TrainConfig
    from tracerl.trainers.model_path import resolve_model
    from tracerl.trainers.update import make_optimizer, policy_update

    torch.manual_seed(0)
    net = AutoModelForCausalLM.from_pretrained(resolve_model(model), dtype=torch.float32)
    cfg = TrainConfig.model_validate({"precision": precision, "optim": {"micro_batch_tokens": budget},
                                      "lora": {"r": 16, "alpha": 32} if lora else None})
    if cfg.lora is not None:
        net = lora_mod.apply(net, cfg.lora)
    rows = make_rows(64, 100, net.config.vocab_size)
    optimizer, scheduler = make_optimizer(net, cfg, 10)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        policy_update(net, optimizer, scheduler, rows, cfg)
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {"budget": budget, "precision": precision, "update_s": min(times), "peak_rss_gb": peak,
            "model_loaded_gb": base, "tokens": sum(len(r) for r in rows)}


def generation(model: str, dtype: str) -> float:
    """Seconds for the engine to answer 64 word problems greedily, 32 new tokens at most each."""
    from tracerl.engines.base import SamplingParams
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.trainers.model_path import resolve_model

    engine = TorchEngine(resolve_model(model), dtype=dtype, max_batch_size=64)
    tok = engine.tokenizer
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": f"Ana has {a} apples and finds {a % 7 + 1} "
                                              "more. How many apples does she have?"}],
                                            add_generation_prompt=True, tokenize=True, return_dict=False))
               for a in range(64)]
    params = SamplingParams(max_tokens=32, temperature=0)
    engine.generate_sync(prompts[0], params)  # warm up
    t0 = time.perf_counter()
    futures = [engine.submit(p, params) for p in prompts]
    for f in futures:
        f.result()
    engine.shutdown()
    return time.perf_counter() - t0


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--budgets", type=int, nargs="+", default=[8192, 2048])
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16-mixed"])
    ap.add_argument("--full", action="store_true", help="all weights instead of LoRA")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--generation", action="store_true", help="time the engine's generation by dtype instead")
    args = ap.parse_args()
    if args.generation:
        print("| engine dtype | 64 greedy replies, 32 tokens (s) |\n| --- | ---: |")
        for dtype in ("float32", "bfloat16", "float32", "bfloat16"):
            print(f"| {dtype} | {generation(args.model, dtype):.1f} |", flush=True)
        return
    if args.one:
        budget, precision = args.one.split(",")
        print(json.dumps(one(args.model, int(budget), precision, not args.full)))
        return
    print("| micro-batch tokens | precision | update (s) | peak RSS (GiB) | after loading (GiB) |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for budget in args.budgets:
        for precision in args.precisions:
            cmd = [sys.executable, __file__, "--model", args.model, "--one", f"{budget},{precision}"]
            out = subprocess.run(cmd + (["--full"] if args.full else []), capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {budget} | {precision} | {r['update_s']:.1f} | {r['peak_rss_gb']:.1f} | {r['model_loaded_gb']:.1f} |",
                  flush=True)


if __name__ == "__main__":
    run()
