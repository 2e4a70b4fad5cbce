"""Trainer throughput: rollout tokens/s through the gateway, and update tokens/s of
``policy_update`` against a plain hand-written PyTorch loop on the same batch.

    .venv/bin/python bench/trainer_throughput.py [--rows 64] [--len 160] [--repeats 5] [--threads 2]

The update comparison runs both on identical rows (random token ids of realistic length,
half of each row masked as response), alternating A/B so machine noise hits both alike; the
figure that matters is the ratio. Rollouts: the built-in math agent on arithmetic tasks
against an in-process gateway with the bundled tiny model.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from tracerl.models import tiny_model_path
from tracerl.trainers.batching import Row
from tracerl.trainers.config import TrainConfig
from tracerl.trainers.update import make_optimizer, policy_update


def make_rows(n: int, length: int, vocab: int, seed: int = 0) -> list[Row]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        t = rng.randint(length // 2, length)
        ids = [rng.randrange(vocab) for _ in range(t + 1)]
        prompt = t // 2
        mask = [0] * prompt + [1] * (t - prompt)
        adv = rng.choice((-1.0, 1.0))
        rows.append(Row(ids[:-1], ids[1:], mask, [adv * m for m in mask],
                        [-1.0 * m for m in mask]))
    return rows


def hand_loop_step(model, opt, rows: list[Row]) -> None:
    """What one would write by hand: pad, forward, gather log-probs, REINFORCE-style loss."""
    width = max(len(r) for r in rows)
    pad = lambda v: v + [0] * (width - len(v))  # noqa: E731
    ids = torch.tensor([pad(r.input_ids) for r in rows])
    tgt = torch.tensor([pad(r.targets) for r in rows])
    mask = torch.tensor([pad(r.mask) for r in rows], dtype=torch.float32)
    adv = torch.tensor([pad(r.advantages) for r in rows])
    attn = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    logits = model(input_ids=ids, attention_mask=attn).logits
    lp = torch.log_softmax(logits.float(), -1).gather(-1, tgt[..., None]).squeeze(-1)
    loss = -(adv * lp * mask).sum() / mask.sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def bench_update(args) -> tuple[float, float]:
    cfg = TrainConfig(optim={"micro_batch_tokens": args.rows * args.len}, rollout={"max_tokens": args.len})
    path = str(tiny_model_path())
    ours = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    hand = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    opt_ours, sched = make_optimizer(ours, cfg, 1000)
    opt_hand = torch.optim.AdamW(hand.parameters(), lr=cfg.optim.lr)
    rows = make_rows(args.rows, args.len, ours.config.vocab_size)
    tokens = sum(len(r) for r in rows)
    policy_update(ours, opt_ours, sched, rows, cfg)  # warm up both
    hand_loop_step(hand, opt_hand, rows)
    times_ours, times_hand = [], []
    for _ in range(args.repeats):
        t = time.process_time()
        policy_update(ours, opt_ours, sched, rows, cfg)
        times_ours.append(time.process_time() - t)
        t = time.process_time()
        hand_loop_step(hand, opt_hand, rows)
        times_hand.append(time.process_time() - t)
    return tokens / statistics.median(times_ours), tokens / statistics.median(times_hand)


def bench_rollouts(n_tasks: int) -> float:
    import tempfile

    from tracerl import tasks
    from tracerl.core.otel import setup_tracing
    from tracerl.core.rollout import RolloutSettings
    from tracerl.core.store import SpanStore
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.gateway.server import GatewayServer
    from tracerl.tasks.agents import math_agent
    from tracerl.trainers.rollouts import run_rollouts

    with tempfile.TemporaryDirectory() as tmp:
        store = SpanStore(f"{tmp}/t.db")
        tracing = setup_tracing(store)
        engine = TorchEngine(max_batch_size=64)
        with GatewayServer(engine, store) as gw:
            settings = RolloutSettings(gateway_url=gw.url, store=store.path, max_tokens=96)
            jobs = [(t, f"bench-{i}", settings) for i, t in enumerate(tasks.get("arithmetic").tasks("train", n_tasks))]
            t0 = time.perf_counter()
            episodes = run_rollouts(math_agent, jobs, tracing=tracing, concurrency=32)
            wall = time.perf_counter() - t0
        engine.shutdown()
    tokens = sum(len(s.response_ids or []) for ep in episodes for s in ep.steps)
    return tokens / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--len", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rollout-tasks", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()
    ours, hand = bench_update(args)
    print(f"update: policy_update {ours:,.0f} tokens/CPU-s, hand loop {hand:,.0f} tokens/CPU-s, "
          f"ratio {ours / hand:.3f}  ({args.rows} rows up to {args.len} tokens, {args.threads} threads)")
    if args.rollout_tasks:
        print(f"rollout: {bench_rollouts(args.rollout_tasks):,.0f} response tokens/s wall "
              f"({args.rollout_tasks} episodes, built-in math agent, concurrency 32)")


if __name__ == "__main__":
    main()
