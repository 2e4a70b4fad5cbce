"""Rejection-sampling fine-tuning from a LangGraph app's exported traces.

    .venv/bin/python bench/rft_from_traces.py [--tasks 96] [--samples 4] [--steps 30] [--out runs/rft-bench]

1. "Production": the LangGraph math agent (examples/math_agent_langgraph.py, one
   tracerl.instrument line) answers train-split arithmetic questions at temperature 1
   against a gateway serving the bundled tiny model; its rollout function returns the
   reward, which is emitted into the trace as a reward span.
2. ``tracerl traces export`` writes the spans to JSON lines.
3. ``tracerl train arithmetic --from-traces app.jsonl --algo rft`` fine-tunes on the
   episodes whose reward passed, and the trainer reports held-out accuracy before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def produce(out: Path, n_tasks: int, samples: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "examples"))
    import math_agent_langgraph as app  # noqa: E402 - the app, instrumented on import

    import tracerl
    from tracerl.tasks.synthetic import TASKS

    db = out / "app.db"
    tasks = TASKS["arithmetic"].tasks("train", n_tasks, seed=123)
    engine = tracerl.TorchEngine()
    with tracerl.GatewayServer(engine, str(db)) as gw:
        settings = tracerl.RolloutSettings(gateway_url=gw.url, store=str(db), temperature=1.0, max_tokens=32)
        episodes = [app.solve(t, settings) for t in tasks for _ in range(samples)]
    engine.shutdown()
    rewards = [ep.reward or 0.0 for ep in episodes]
    return {"episodes": len(episodes), "rewarded": sum(r > 0 for r in rewards)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=96)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("runs/rft-bench"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["TRACERL_HOME"] = str(args.out / "home")  # the adapter's default store stays here
    env = dict(os.environ)
    t0 = time.time()
    stats = produce(args.out, args.tasks, args.samples)
    cli = [sys.executable, "-m", "tracerl.cli.main"]
    subprocess.run([*cli, "traces", "export", str(args.out / "app.jsonl"), "--db", str(args.out / "app.db")],
                   check=True, env=env)
    t1 = time.time()
    run = args.out / "train"
    subprocess.run([*cli, "train", "arithmetic", "--from-traces", str(args.out / "app.jsonl"), "--algo", "rft",
                    "--steps", str(args.steps), "--batch-size", "32", "--output", str(run), "--quiet"],
                   check=True, env=env)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [m["eval/accuracy"] for m in lines if "eval/accuracy" in m]
    print(f"app: {stats['episodes']} episodes, {stats['rewarded']} rewarded ({time.time() - t0:.0f}s incl. export)")
    print(f"rft: {args.steps} steps in {time.time() - t1:.0f}s; held-out accuracy {evals[0]:.1%} -> {evals[-1]:.1%}")


if __name__ == "__main__":
    main()
