"""Sync against async training on the bundled model: wall time and held-out accuracy.

    .venv/bin/python bench/async_speedup.py [--steps 40] [--seeds 0 1] [--out runs/async-bench]

Each configuration is one ``tracerl train arithmetic`` run (built-in agent, defaults
otherwise) in its own process; async rolls out step k+1 while step k updates
(``async_staleness=1``; the gateway and engine then run in a child process, the default for
async). Runs alternate sync/async per seed so machine noise hits both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run(out: Path, steps: int, seed: int, staleness: int) -> tuple[float, float, float, float]:
    cmd = [sys.executable, "-m", "tracerl.cli.main", "train", "arithmetic", "--steps", str(steps),
           "--seed", str(seed), "--output", str(out), "--quiet", "--set", f"async_staleness={staleness}",
           "--set", "eval_every=0", "--set", "save_every=0"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [m["eval/accuracy"] for m in lines if "eval/accuracy" in m]
    # the training steps alone: from the first evaluation's record to the last step's
    steps_done = [m["time"] for m in lines if "policy/weight_version" in m]
    loop = steps_done[-1] - next(m["time"] for m in lines if "eval/accuracy" in m)
    return wall, loop, evals[0], evals[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=Path("runs/async-bench"))
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float, float]]] = {"sync": [], "async": []}
    for seed in args.seeds:
        for name, staleness in (("sync", 0), ("async", 1)):
            out = args.out / f"{name}-{seed}"
            if out.exists():
                import shutil

                shutil.rmtree(out)
            results[name].append(run(out, args.steps, seed, staleness))
            wall, loop, before, after = results[name][-1]
            print(f"{name:5s} seed {seed}: {wall:6.1f}s wall, {loop:6.1f}s of training steps, "
                  f"accuracy {before:.1%} -> {after:.1%}", flush=True)
    for name, rows in results.items():
        print(f"{name:5s} median wall {statistics.median(r[0] for r in rows):.1f}s, steps "
              f"{statistics.median(r[1] for r in rows):.1f}s, mean accuracy after {statistics.fmean(r[3] for r in rows):.1%}")
    for i, what in ((0, "wall"), (1, "training steps")):
        ratio = statistics.median(r[i] for r in results["sync"]) / statistics.median(r[i] for r in results["async"])
        print(f"speed-up of the {what} (sync / async): {ratio:.2f}x")


if __name__ == "__main__":
    main()
