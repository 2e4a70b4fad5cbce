"""FSDP2 across processes (gloo on CPU): one update on two ranks equals the one-process update."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tracerl.gateway.server import free_port

HERE = Path(__file__).parent


def _run(args: list[str], out: Path) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    done = subprocess.run([sys.executable, *args, str(HERE / "distributed_update.py"), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out / "result.pt", weights_only=False)


def _nodes(n: int, command: list[str], timeout: float = 300) -> list[subprocess.CompletedProcess]:
    """``command`` started ``n`` times at once, as ``n`` machines would each run it. Output goes
    to files: a node blocked on a full pipe while we wait on another would hang them both."""
    import tempfile

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    with tempfile.TemporaryDirectory() as tmp:
        logs = [(Path(tmp) / f"{i}.out", Path(tmp) / f"{i}.err") for i in range(n)]
        procs = []
        for out, err in logs:
            with out.open("w") as stdout, err.open("w") as stderr:  # the child keeps its own copies
                procs.append(subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr))
        try:
            codes = [proc.wait(timeout=timeout) for proc in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        return [subprocess.CompletedProcess(command, code, out.read_text(), err.read_text())
                for code, (out, err) in zip(codes, logs)]


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> dict:
    return _run([], tmp_path_factory.mktemp("one"))


@pytest.fixture(scope="module", params=["two ranks", "two nodes"])
def results(request, single, tmp_path_factory) -> tuple[dict, dict]:
    """The one-process update, and the same on two ranks: of one torchrun, or of two torchruns
    that meet at a c10d rendezvous on 127.0.0.1 as two nodes of one process each would."""
    out = tmp_path_factory.mktemp("sharded")
    if request.param == "two ranks":
        return single, _run(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"], out)
    rdzv = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "test"]
    for node in _nodes(2, [sys.executable, "-m", "torch.distributed.run", *rdzv, str(HERE / "distributed_update.py"),
                           str(out)]):
        assert node.returncode == 0, node.stderr[-3000:]
    return single, torch.load(out / "result.pt", weights_only=False)


def test_two_ranks_have_the_one_process_gradient(results):
    single, sharded = results
    assert (single["world"], sharded["world"]) == (1, 2)
    initial = single["initial"]
    for name, weight in single["sgd"]["weights"].items():
        grad = initial[name] - weight  # SGD at lr 1: the change is minus the gradient
        grad2 = initial[name] - sharded["sgd"]["weights"][name]
        assert grad.abs().max() > 0 or name.endswith("bias"), name  # the update reached every weight
        torch.testing.assert_close(grad2, grad, atol=1e-5, rtol=1e-4, msg=name)
    assert sharded["sgd"]["metrics"]["stats/grad_norm"] == pytest.approx(single["sgd"]["metrics"]["stats/grad_norm"],
                                                                         rel=1e-5)


def test_two_ranks_make_the_one_process_adamw_step_and_report_its_metrics(results):
    single, sharded = results
    initial, lr = single["initial"], 3e-4  # the default optim.lr
    for name, weight in single["adamw"]["weights"].items():
        # Adam divides by sqrt(v): where the gradient is near 0, the float noise of summing it in
        # another order becomes up to ~lr of change (seen: 2.5e-5 where |grad| was 5e-6, 5e-5 of
        # the tensor's largest). Where it is well above that noise, the two steps agree tightly.
        grad = (initial[name] - single["sgd"]["weights"][name]).abs()
        clear = grad > 1e-3 * grad.max()
        diff = (sharded["adamw"]["weights"][name] - weight).abs()
        worst = float(diff[clear].max()) if clear.any() else 0.0
        assert worst <= 2e-5, (name, worst)
        assert diff.max() <= 2 * lr, (name, float(diff.max()))
    a, b = single["adamw"]["metrics"], sharded["adamw"]["metrics"]
    assert set(a) == set(b)
    for key in set(a) - {"update/micro_batches"}:  # each rank packs its own rows
        assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key


def test_train_nproc_2_runs_under_torchrun_and_its_checkpoints_resume_in_one_process(tmp_path):
    """The CLI's --nproc: rank 0 serves and trains, rank 1 holds a shard; the engine gets the
    gathered weights each step (its logprobs match the trainer's), and a checkpoint written by
    two ranks resumes in one process."""
    import json

    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("WORLD_SIZE", None)
    common = ["-m", "tracerl", "train", "arithmetic", "--batch-size", "4", "--group-size", "4", "--eval-size", "0",
              "--output", str(out), "--quiet"]
    for extra in (["--steps", "2", "--nproc", "2"], ["--steps", "3", "--resume"]):
        done = subprocess.run([sys.executable, *common, *extra], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.count("checkpoint:") == 1, done.stdout  # rank 0 alone reports
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "time/update_s" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    gaps = [r["stats/engine_logprob_gap_mean"] for r in steps if "stats/engine_logprob_gap_mean" in r]
    assert gaps and max(gaps) < 1e-4  # the engine served the weights the trainer had
    state = torch.load(out / "checkpoints" / "step-000003" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 3 and state["weight_version"] == 3


@pytest.mark.slow
def test_train_on_two_nodes_meeting_at_a_rendezvous(tmp_path):
    """``tracerl train --nnodes 2 --rdzv-endpoint``, the same command on each "node": one run,
    trained by global rank 0 with the other node holding a shard, resumable in one process."""
    import json

    out = tmp_path / "run"
    command = [sys.executable, "-m", "tracerl", "train", "arithmetic", "--batch-size", "4", "--group-size", "4",
               "--eval-size", "0", "--output", str(out), "--quiet", "--steps", "2",
               "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
    nodes = _nodes(2, command)
    for node in nodes:
        assert node.returncode == 0, node.stderr[-3000:]
    assert sum(node.stdout.count("checkpoint:") for node in nodes) == 1  # global rank 0 alone reports
    steps = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "time/update_s" in r]
    assert [r["step"] for r in steps] == [1, 2]
    gaps = [r["stats/engine_logprob_gap_mean"] for r in steps if "stats/engine_logprob_gap_mean" in r]
    assert gaps and max(gaps) < 1e-4  # the engine served the gathered weights
    resumed = subprocess.run([*command[:command.index("--steps")], "--steps", "3", "--resume"],
                             env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]  # in one process: another layout
    state = torch.load(out / "checkpoints" / "step-000003" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 3 and state["weight_version"] == 3


def test_nnodes_without_a_rendezvous_is_one_line(capsys):
    from tracerl.cli.main import main

    assert main(["train", "arithmetic", "--nnodes", "2", "--steps", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--rdzv-endpoint HOST:PORT" in err, err
