"""Sync against async training on the bundled model: wall time and held-out accuracy.

    .venv/bin/python bench/async_speedup.py [--steps 40] [--seeds 0 1] [--out runs/async-bench]

Each configuration is one ``tracerl train arithmetic`` run (built-in agent, defaults
otherwise) in its own process; async rolls out step k+1 while step k updates
(``async_staleness=1``). Runs alternate sync/async per seed so machine noise hits both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run(out: Path, steps: int, seed: int, staleness: int) -> tuple[float, float, float]:
    cmd = [sys.executable, "-m", "tracerl.cli.main", "train", "arithmetic", "--steps", str(steps),
           "--seed", str(seed), "--output", str(out), "--quiet", "--set", f"async_staleness={staleness}",
           "--set", "eval_every=0", "--set", "save_every=0"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [m["eval/accuracy"] for m in lines if "eval/accuracy" in m]
    return wall, evals[0], evals[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=Path("runs/async-bench"))
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {"sync": [], "async": []}
    for seed in args.seeds:
        for name, staleness in (("sync", 0), ("async", 1)):
            out = args.out / f"{name}-{seed}"
            if out.exists():
                import shutil

                shutil.rmtree(out)
            results[name].append(run(out, args.steps, seed, staleness))
            wall, before, after = results[name][-1]
            print(f"{name:5s} seed {seed}: {wall:6.1f}s wall, accuracy {before:.1%} -> {after:.1%}", flush=True)
    for name, rows in results.items():
        print(f"{name:5s} median wall {statistics.median(r[0] for r in rows):.1f}s, "
              f"mean accuracy after {statistics.fmean(r[2] for r in rows):.1%}")
    ratio = statistics.median(r[0] for r in results["sync"]) / statistics.median(r[0] for r in results["async"])
    print(f"speed-up (sync wall / async wall): {ratio:.2f}x")


if __name__ == "__main__":
    main()
