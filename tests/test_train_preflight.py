"""Runs that did not start are not runs: a `tracerl train` whose preflight fails (a reward that
cannot run, a data file that is not there, a gateway replica nobody answers at) leaves no run
folder for `tracerl runs list`, and a resumed run's folder exactly as it was; a run that
started and then raised is `failed`, never `running` or `interrupted`."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from tracerl.cli.main import main
from tracerl.runs.folder import open_run

pytest.importorskip("torch")
pytest.importorskip("transformers")

AGENTS = Path(__file__).parent / "rollout_agents.py"
TINY = ["--batch-size", "2", "--group-size", "2", "--set", "tensorboard=false", "--set", "rollout.max_tokens=16",
        "--threads", "1", "--quiet"]


def _runs_list(root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["runs", "list", "--runs", str(root)]) == 0
    return " ".join(capsys.readouterr().out.split())  # rich folds lines to the terminal's width


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(f'{{"question": "{i} + {i} = ?", "answer": "{2 * i}"}}\n' for i in range(8)))
    return path


def test_a_reward_that_cannot_run_leaves_no_run_folder(tmp_path, data, capsys):
    reward = tmp_path / "reward.py"
    reward.write_text("def grade(task, answer):\n    raise KeyError('expected_answer')\n")
    root = tmp_path / "runs"
    root.mkdir()
    out = root / "bad-reward"
    code = main(["train", "--data", str(data), "--reward", f"{reward}:grade", "--steps", "1", "--eval-size", "0",
                 "--output", str(out), *TINY])
    assert code == 1
    assert "the reward function failed on the first episode" in _error_line(capsys)
    assert not out.exists()  # its store, gateway and heldout.json went with it
    assert f"no runs under {root}" in _runs_list(root, capsys)


def test_a_missing_data_file_leaves_no_folder_not_even_the_parents_it_made(tmp_path, capsys):
    root = tmp_path / "runs"
    root.mkdir()
    code = main(["train", "--data", str(tmp_path / "no-such.jsonl"), "--steps", "1", "--output",
                 str(root / "sweep" / "a"), *TINY])
    assert code == 1
    assert "no-such.jsonl" in _error_line(capsys)
    assert list(root.iterdir()) == []  # runs/sweep was made for this run: gone too, runs/ stays
    assert f"no runs under {root}" in _runs_list(root, capsys)


def test_an_unreachable_replica_leaves_a_resumed_run_exactly_as_it_was(tmp_path, capsys):
    store = tmp_path / "shared.db"
    out = tmp_path / "runs" / "demo"
    common = ["train", "arithmetic", "--agent", f"{AGENTS}:parity_agent", "--output", str(out), "--store",
              str(store), "--eval-size", "0", *TINY]
    assert main([*common, "--steps", "1"]) == 0
    listed = _runs_list(tmp_path / "runs", capsys)
    assert "1/1" in listed and "finished" in listed
    before = _tree(out)
    url = f"http://127.0.0.1:{_unused_port()}"
    assert main([*common, "--steps", "2", "--resume", "--gateway", url]) == 1
    line = _error_line(capsys)
    assert line.startswith(f"tracerl: error: --gateway {url}: no tracerl gateway answers there"), line
    assert _tree(out) == before  # no byte of the run it would have resumed changed, nothing added
    assert _runs_list(tmp_path / "runs", capsys) == listed


def test_a_run_that_raised_after_it_started_is_failed_not_running(tmp_path, capsys):
    broken = tmp_path / "broken_agent.py"
    broken.write_text("def boom(task, config):\n    raise RuntimeError('the tool server is down')\n")
    out = tmp_path / "runs" / "broken"
    code = main(["train", "arithmetic", "--agent", f"{broken}:boom", "--steps", "3", "--eval-size", "0",
                 "--set", "max_failed_steps=1", "--output", str(out), *TINY])
    assert code == 1  # stopped at its first step, after it had started
    assert "step 1: all 4 rollouts failed" in _error_line(capsys)
    run = open_run(out)  # this process is alive: a stale `running` would still read as running
    assert run.status == "failed" and run.error is not None and run.error.startswith("RolloutError: step 1")
    listed = _runs_list(tmp_path / "runs", capsys)
    assert "0/3" in listed and "failed" in listed and "running" not in listed and "interrupted" not in listed
