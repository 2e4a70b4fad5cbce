"""Rollouts on Ray workers against rank 0's threads: wall time of the same small training run.

    .venv/bin/python bench/ray_workers.py [--rounds 2] [--steps 2] [--batch-size 2] [--group-size 2] [--out DIR]

Results: docs/performance.md, "What do Ray rollout workers cost against threads?".

Both runs train the LangGraph example agent on ``calculator`` with tests/test_ray_rollouts.py's
small settings; the workers' run adds ``--rollout-workers 2 --ray-address HEAD``. The cluster is
tests/ray_loopback.py's: two nodes (a head and a second raylet, one CPU each) on 127.0.0.1 in
namespaces of its own, started once before the runs, so its start is in neither run's time.
Rounds alternate threads and workers so machine noise hits both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import ray_loopback  # noqa: E402

SMALL = ["--eval-size", "0", "--set", "tensorboard=false", "--set", "rollout.max_tokens=24", "--threads", "1",
         "--quiet", "--seed", "3"]
WORKERS = ["--rollout-workers", "2", "--ray-address", "{address}"]
# the command's own start (epoch, as metrics.jsonl's "time") and wall time, at the end of its log
TIMED = ("import subprocess, sys, time\nt, e = time.perf_counter(), time.time()\nrc = subprocess.call(sys.argv[1:])\n"
         "print(f'start {e:.3f} wall_s {time.perf_counter() - t:.2f}', flush=True)\nsys.exit(rc)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=2, help="tasks a step")
    parser.add_argument("--group-size", type=int, default=2, help="episodes a task")
    parser.add_argument("--out", type=Path, default=None, help="run folders and logs (default: a temporary folder)")
    args = parser.parse_args()
    why = ray_loopback.unavailable()
    if why:
        sys.exit(f"cannot start the loopback cluster: {why}")
    out = args.out or Path(tempfile.mkdtemp(prefix="ray-bench-"))
    agent = ["--agent", f"{ROOT / 'examples' / 'math_agent_langgraph.py'}:solve"]
    commands: list[tuple[list[str], dict[str, str]]] = []
    labels: list[tuple[str, int]] = []
    for r in range(args.rounds):
        for mode in ("threads", "workers"):
            train = [sys.executable, "-m", "tracerl", "train", "calculator", *agent, "--steps", str(args.steps),
                     "--batch-size", str(args.batch_size), "--group-size", str(args.group_size),
                     "--output", str(out / f"{mode}-{r}"), *SMALL, *(WORKERS if mode == "workers" else [])]
            commands.append(([sys.executable, "-c", TIMED, *train], {}))
            labels.append((mode, r))
    finished, cluster_log = ray_loopback.run_on_cluster(commands, out / "logs", timeout_s=300 + 240 * len(commands))
    if len(finished) != len(commands) or any(done.rc for done in finished):
        sys.exit(f"a run failed or the cluster did not start:\n{cluster_log[-3000:]}\n"
                 + "\n".join(done.tail() for done in finished if done.rc))
    walls: dict[str, list[float]] = {"threads": [], "workers": []}
    for (mode, r), done in zip(labels, finished, strict=True):
        start, wall = (float(x) for x in done.log.read_text().split("start ")[-1].split()[::2])
        steps = [json.loads(line) for line in (out / f"{mode}-{r}" / "metrics.jsonl").read_text().splitlines()]
        rollout = [m["time/rollout_s"] for m in steps if "time/rollout_s" in m]
        # to the first step's record: start-up (model, gateway, Ray and its workers) and step 1
        first, last = steps[0]["time"] - start, steps[-1]["time"] - start
        walls[mode].append(wall)
        print(f"round {r} {mode:8s} wall {wall:5.1f} s: to step 1's end {first:5.1f}, steps 2-{len(steps)} "
              f"{last - first:5.1f}, after the last {wall - last:4.1f}; rollout s/step "
              f"{', '.join(f'{x:.2f}' for x in rollout)}")
    threads, workers = statistics.median(walls["threads"]), statistics.median(walls["workers"])
    print(f"median wall: threads {threads:.1f} s, workers {workers:.1f} s ({workers / threads:.2f}x)")


if __name__ == "__main__":
    main()
