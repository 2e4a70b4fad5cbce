"""`tracerl train --gateway A --gateway B`: two `tracerl gateway serve --accept-weights` processes,
each with its own engine, serve a run's rollouts and all three write one PostgreSQL store. Every
episode is served by one gateway, both gateways serve some, and each step's rollouts (and each
evaluation's) see one weight version: the barrier that sends each update to every gateway."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pg
import pytest

from tracerl.core import semconv as sc
from tracerl.core.store import open_store
from tracerl.gateway.server import free_port

postgres_server = pg.postgres_server
AGENT = f"{Path(__file__).parent / 'rollout_agents.py'}:parity_agent"
STEPS, BATCH, GROUP, EVAL = 2, 2, 2, 2


def _gateway(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tracerl", "gateway", "serve", "--port", str(port), "--store", url,
            "--accept-weights", "--name", "tracerl-tiny"]
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})


def _wait_healthy(root: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{root} did not come up: {log.read_text()[-2000:]}")


@pytest.mark.slow
def test_two_gateways_serve_a_run_and_each_step_sees_one_weight_version(postgres_server, tmp_path):
    url = pg.fresh_url(postgres_server)
    roots, procs = [], []
    try:
        for i in range(2):
            port = free_port()
            roots.append(f"http://127.0.0.1:{port}")
            procs.append(_gateway(url, port, tmp_path / f"gateway-{i}.log"))
        for root, proc, i in zip(roots, procs, range(2), strict=True):
            _wait_healthy(root, proc, tmp_path / f"gateway-{i}.log")
        out = tmp_path / "run"
        argv = [sys.executable, "-m", "tracerl", "train", "arithmetic", "--agent", AGENT, "--output", str(out),
                "--store", url, "--gateway", roots[0], "--gateway", roots[1], "--steps", str(STEPS),
                "--eval-size", str(EVAL), "--batch-size", str(BATCH), "--group-size", str(GROUP),
                "--set", "eval_every=0", "--set", "tensorboard=false", "--set", "rollout.max_tokens=16",
                "--threads", "1", "--quiet"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        versions = [httpx.get(f"{root}/health").json()["weight_version"] for root in roots]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    assert versions == [STEPS, STEPS]  # every gateway took every update

    run_id = json.loads((out / "config.json").read_text())["run_id"]
    with open_store(url, read_only=True) as store:
        by_session = store.for_run(run_id).spans_by_session()
    served: dict[str, set[str]] = collections.defaultdict(set)  # session -> gateway instances
    seen: dict[str, set[int]] = collections.defaultdict(set)  # step (or evaluation) -> weight versions
    for session, records in by_session.items():
        for r in records:
            if r.attributes.get(sc.SOURCE) == "gateway":
                served[session].add(r.resource["service.instance.id"])
                seen[session.split("-")[1]].add(int(r.attributes[sc.WEIGHT_VERSION]))
    assert len(served) == STEPS * BATCH * GROUP + 2 * EVAL
    assert all(len(instances) == 1 for instances in served.values())  # a session sticks to its gateway
    counts = collections.Counter(next(iter(i)) for i in served.values())
    assert len(counts) == 2 and min(counts.values()) >= 4, counts  # in turn: both gateways serve
    # {nonce}-s{step}-t{i}-g{j}, and {nonce}-eval{step}-...: before training, after the last update
    assert {part: sorted(v) for part, v in seen.items()} == {"s0": [0], "s1": [1], "eval0": [0], "eval2": [STEPS]}
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["rollout/weight_versions"] for m in metrics if "rollout/weight_versions" in m] == [1.0] * STEPS
