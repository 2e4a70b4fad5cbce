"""Per-agent advantage normalisation (Dr. MAS, arXiv 2602.08847) against a baseline pooled per
task, on the solver-judge example: the same runs but for ``group_by``, two seeds each.

    .venv/bin/python bench/agent_normalisation.py --steps 20 --seeds 0 1

Pooled per task, the solver's and the judge's rewards share one mean and std: an agent whose
rewards sit apart from the other's (a judge that is mostly right while the solver is mostly
wrong) is pushed by the other's outcome. Per agent, each is measured against its own rewards.
Prints one Markdown row per run: held-out accuracy (the solver's answers) and the judge's
held-out reward, first and last evaluation; the training rewards of both agents over the last
five steps; the update's gradient norm (mean, max).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {"pooled per task": "task", "per agent (Dr. MAS)": "task_agent"}


def train(out: Path, group_by: str, seed: int, args: argparse.Namespace) -> float:
    cmd = [str(Path(sys.executable).parent / "tracerl"), "train", "arithmetic",
           "--agent", str(ROOT / "examples" / "solver_judge.py") + ":solve", "--output", str(out),
           "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--group-size", str(args.group_size),
           "--eval-size", str(args.eval_size), "--seed", str(seed), "--lr", str(args.lr),
           "--set", f"group_by={group_by}", "--set", f"eval_every={args.steps}", "--set", "progress=false"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def summary(out: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/accuracy" in r]
    steps = [r for r in rows if "stats/grad_norm" in r]
    last = steps[-5:]
    return {
        "acc0": evals[0]["eval/accuracy"], "acc1": evals[-1]["eval/accuracy"],
        "judge0": evals[0].get("eval/reward_mean/judge", float("nan")),
        "judge1": evals[-1].get("eval/reward_mean/judge", float("nan")),
        "solver_train": statistics.fmean(r.get("rollout/reward_mean/solver", 0.0) for r in last),
        "judge_train": statistics.fmean(r.get("rollout/reward_mean/judge", 0.0) for r in last),
        "grad_mean": statistics.fmean(r["stats/grad_norm"] for r in steps),
        "grad_max": max(r["stats/grad_norm"] for r in steps),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--eval-size", type=int, default=100)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--output", type=Path, default=ROOT / "runs" / "bench-agent-norm")
    args = p.parse_args()
    print("| grouping | seed | held-out accuracy (solver) | judge's held-out reward | train reward, last 5 steps "
          "(solver / judge) | grad norm mean / max | wall |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for seed in args.seeds:
        for label, group_by in MODES.items():
            out = args.output / f"{group_by}-{seed}"
            wall = train(out, group_by, seed, args)
            s = summary(out)
            print(f"| {label} | {seed} | {s['acc0']:.1%} → {s['acc1']:.1%} | {s['judge0']:.2f} → {s['judge1']:.2f} | "
                  f"{s['solver_train']:.2f} / {s['judge_train']:.2f} | {s['grad_mean']:.2f} / {s['grad_max']:.2f} | "
                  f"{wall / 60:.1f} min |", flush=True)


if __name__ == "__main__":
    main()
