"""Runs that go wrong: an agent that raises on every rollout stops `tracerl train` (and fails
`tracerl eval`) with one line, and Ctrl-C says how far training got and how to continue."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracerl.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tracerl.trainers import checkpoint  # noqa: E402

ROOT = Path(__file__).parent.parent
AGENTS = Path(__file__).parent / "rollout_agents.py"
TINY = ["--batch-size", "2", "--group-size", "2", "--set", "eval_size=0", "--set", "tensorboard=false",
        "--set", "rollout.max_tokens=16", "--quiet"]


@pytest.fixture
def broken_agent(tmp_path) -> str:
    path = tmp_path / "broken_agent.py"
    path.write_text("def boom(task, config):\n    raise RuntimeError('the tool server is down\\nsecond line')\n")
    return f"{path}:boom"


def test_an_agent_failing_every_rollout_stops_training_with_one_line(tmp_path, broken_agent, capsys):
    out = tmp_path / "run"
    code = main(["train", "arithmetic", "--agent", broken_agent, "--steps", "4", "--output", str(out), *TINY])
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("tracerl: error: step 2: all 4 rollouts failed (2 steps in a row)"), last
    assert "RuntimeError: the tool server is down" in last and "second line" not in last
    assert f"tracerl eval arithmetic --agent {broken_agent}" in last
    assert checkpoint.latest(out / "checkpoints") is None  # no checkpoint of steps that trained on nothing
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1]


def test_max_failed_steps_sets_how_many_failing_steps_stop_the_run(tmp_path, broken_agent, capsys):
    out = tmp_path / "run"
    code = main(["train", "arithmetic", "--agent", broken_agent, "--steps", "4", "--output", str(out),
                 "--set", "max_failed_steps=1", *TINY])
    assert code == 1
    assert "step 1: all 4 rollouts failed, the first" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (out / "metrics.jsonl").read_text().strip()
    assert main(["train", "--set", "max_failed_steps=0", "--dry-run"]) == 1
    assert "max_failed_steps: Input should be greater than or equal to 1" in capsys.readouterr().err


def test_eval_of_an_agent_whose_every_episode_failed_exits_1(tmp_path, broken_agent, capsys):
    out = tmp_path / "eval"
    code = main(["eval", "arithmetic", "--agent", broken_agent, "--max-examples", "3", "--output", str(out)])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("tracerl: error: all 3 episodes of arithmetic failed, the first with error: "
                          "RuntimeError: the tool server is down;"), err
    assert str(out / "episodes.jsonl") in err
    # the library still returned its report: it was written out
    report = json.loads((out / "report.json").read_text())
    assert report["termination_reasons"] == {"error": 3}


@pytest.mark.slow
def test_ctrl_c_says_the_step_and_how_to_resume(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "tracerl.cli.main", "train", "arithmetic", "--agent", f"{AGENTS}:parity_agent",
           "--steps", "500", "--output", str(out), "--threads", "1", *TINY]
    # SIGINT back to its default in the child: a suite started in the background (nohup, `&`)
    # ignores it, and Python then keeps ignoring it, as it should for a backgrounded run
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while checkpoint.latest(out / "checkpoints") is None:  # a step done, logged and saved
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no step finished in time"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    line = stderr.strip().splitlines()[-1]
    match = re.fullmatch(r"interrupted at step (\d+); checkpoint (\S+) saved; continue with --resume.*", line)
    assert match, line
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert int(match.group(1)) == steps[-1] >= 1
    assert Path(match.group(2)) == checkpoint.latest(out / "checkpoints")


def test_a_step_whose_episodes_time_out_says_the_engines_rate_and_what_to_change_once(tmp_path, caplog):
    path = tmp_path / "slow_agent.py"
    path.write_text("import time\nimport tracerl\n\n\n@tracerl.rollout(timeout_s=0.2)\n"
                    "def slow(task, config):\n    time.sleep(0.6)\n")
    with caplog.at_level("WARNING", logger="tracerl.trainers.loop"):
        code = main(["train", "arithmetic", "--agent", f"{path}:slow", "--steps", "2", "--output",
                     str(tmp_path / "run"), *TINY])
    assert code == 1  # two steps whose every rollout failed (timed out): the run stops, as for any failure
    advice = [r.getMessage() for r in caplog.records if "episodes timed out" in r.getMessage()]
    assert len(advice) == 1, advice  # said once, not every step
    assert advice[0].startswith("step 1: 4 of 4 episodes timed out: the engine answered 0.0 tokens/s")
    assert "`concurrency` (" in advice[0] and "`max_tokens` (16)" in advice[0] and "`timeout_s` (0.2)" in advice[0]
