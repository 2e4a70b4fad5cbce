"""What `tracerl train` prints: where a resumed run continues from, the accuracy it started
at, every algorithm in --algo's help, and progress lines that fit offline (RFT) steps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tracerl.cli.main import main
from tracerl.trainers.config import ALGO_NAMES, TrainConfig

AGENTS = f"{Path(__file__).parent / 'rollout_agents.py'}:parity_agent"
TINY = ["--batch-size", "2", "--group-size", "2", "--set", "tensorboard=false", "--set", "rollout.max_tokens=16",
        "--threads", "1"]


def test_algo_help_lists_every_algorithm_the_config_accepts(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "rft" in ALGO_NAMES and len(ALGO_NAMES) >= 6
    assert re.search(r"--algo (\S+ )?" + re.escape(" | ".join(ALGO_NAMES)), text), text  # (its type, then help)
    for name in ALGO_NAMES:  # each one listed is one the config takes
        assert TrainConfig.model_validate({"algo": {"type": name}}).algo.type == name


@pytest.mark.slow
def test_resume_says_where_it_continues_from_and_the_accuracy_it_started_at(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    common = ["train", "arithmetic", "--agent", AGENTS, "--output", str(out), "--eval-size", "1",
              "--set", "eval_every=0", "--quiet", *TINY]
    assert main([*common, "--steps", "1"]) == 0
    first = capsys.readouterr().out
    before = re.search(r"accuracy before: (\S+)", first).group(1)
    assert before.endswith("%")
    assert main([*common, "--steps", "2", "--resume"]) == 0
    second = capsys.readouterr().out
    assert second.splitlines()[0] == f"resuming from step 1 ({out / 'checkpoints' / 'step-000001'})"
    assert f"accuracy before: {before} (measured by the run resumed at step 1)" in second
    assert "n/a" not in second
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 1, 2, 2]  # eval, step, eval; then the resumed run's step 2 and its eval


def test_from_traces_progress_shows_loss_and_trajectories_not_rollouts(tmp_path, capsys):
    pytest.importorskip("torch")
    from test_rft import _write_app_traces

    traces = tmp_path / "app.jsonl"
    _write_app_traces(traces)  # 8 episodes, 4 of them rewarded
    code = main(["train", "arithmetic", "--from-traces", str(traces), "--algo", "rft", "--steps", "2",
                 "--batch-size", "3", "--eval-size", "0", "--output", str(tmp_path / "run"),
                 "--set", "tensorboard=false"])
    assert code == 0
    steps = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert len(steps) == 2, steps
    for line in steps:
        assert re.fullmatch(r"step +\d+  loss \d+\.\d{4}  trajectories 3 of 4  update \d+\.\ds", line), line


@pytest.mark.slow
def test_train_on_one_benchmark_and_evaluate_on_another(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("TRACERL_DATA_DIR", str(Path(__file__).parent / "data"))
    out = tmp_path / "run"
    common = ["train", "deepscaler", "--output", str(out), "--steps", "1", "--set", "eval_every=0", "--quiet", *TINY]
    assert main([*common, "--eval-size", "2"]) == 1  # a training set has no test split: say what to do
    assert "deepscaler has no 'test' split (it has: train): it is a training set; evaluate on another task " \
           "with --eval-task NAME, or pass --eval-size 0" in capsys.readouterr().err
    assert main([*common, "--eval-size", "2", "--eval-task", "aime"]) == 0
    held = json.loads((out / "heldout.json").read_text())["task_ids"]
    assert len(held) == 2 and all(t.startswith("aime/") for t in held)
    assert main(["train", "deepscaler", "--eval-task", "terminal", "--output", str(tmp_path / "r2"), *TINY]) == 1
    assert "pass --agent to evaluate with the agent you train" in capsys.readouterr().err
