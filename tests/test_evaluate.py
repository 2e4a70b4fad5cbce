"""Evaluation: the unbiased pass@k estimator, the report, and `tracerl eval` agreeing with the trainer."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracerl.core.types import Episode, Task, TerminationReason
from tracerl.trainers.evaluate import EvalReport, pass_at_k


def test_pass_at_k_hand_values():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 4) == 1.0  # any correct sample passes when k = n
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the share correct
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_pass_at_k_equals_the_share_of_k_subsets_with_a_hit():
    outcomes = [1, 0, 0, 1, 0, 0]
    for k in range(1, len(outcomes) + 1):
        subsets = list(itertools.combinations(outcomes, k))
        exact = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(len(outcomes), sum(outcomes), k) == pytest.approx(exact)


def _ep(task: str, i: int, correct: bool, reason=TerminationReason.SUCCESS) -> Episode:
    return Episode(id=f"{task}-{i}", task=Task(id=task), reward=float(correct), is_correct=correct,
                   termination_reason=reason)


def test_report_aggregates_per_task():
    eps = [_ep("a", 0, True), _ep("a", 1, False), _ep("b", 0, False),
           _ep("b", 1, False, TerminationReason.TIMEOUT)]
    report = EvalReport.from_episodes(eps, n=2, ks=[1, 2])
    assert report.accuracy == pytest.approx(0.25)  # mean of 1/2 and 0/2
    assert report.pass_at[2][0] == pytest.approx(0.5)  # a: 1, b: 0
    # 95% half-width over the two per-task values 0.5 and 0: 1.96 * stdev / sqrt(2)
    assert report.accuracy_ci == pytest.approx(1.96 * math.sqrt(0.125) / math.sqrt(2))
    assert report.reasons == {"success": 3, "timeout": 1}
    assert report.tool_use is None  # no step was offered a tool


def test_tool_use_is_the_share_of_episodes_that_called_a_tool_where_one_was_offered():
    from tracerl.core.types import Message, Step, ToolCall, Trajectory
    from tracerl.trainers.metrics import episode_metrics

    tool = [{"type": "function", "function": {"name": "calculator"}}]
    call = Message(role="assistant", tool_calls=[ToolCall(name="calculator", arguments='{"expression": "1 + 2"}')])
    said = Message(role="assistant", content="The answer is 3.")
    eps = [_ep("a", 0, True), _ep("a", 1, False), _ep("b", 0, True)]
    eps[0].trajectories = [Trajectory(steps=[Step(id="s1", tools=tool, output_message=call),
                                             Step(id="s2", tools=tool, output_message=said)])]
    eps[1].trajectories = [Trajectory(steps=[Step(id="s3", tools=tool, output_message=said)])]
    assert EvalReport.from_episodes(eps, n=1).tool_use == pytest.approx(1 / 3)
    assert episode_metrics(eps)["rollout/tool_use"] == pytest.approx(1 / 3)
    assert "rollout/tool_use" not in episode_metrics(eps[2:])


@pytest.mark.slow
def test_eval_cli_reports_the_trainers_held_out_accuracy(tmp_path):
    pytest.importorskip("torch")
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tracerl.cli.main"]
    subprocess.run([*cmd, "train", "arithmetic", "--steps", "1", "--batch-size", "2", "--group-size", "2",
                    "--eval-size", "24", "--output", str(run), "--quiet"], check=True, capture_output=True,
                   timeout=300)
    after = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()][-1]
    assert "eval/accuracy" in after
    out = tmp_path / "eval"
    proc = subprocess.run([*cmd, "eval", "arithmetic", "--model", str(run / "checkpoints" / "step-000001"),
                           "--max-examples", "24", "--output", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["accuracy"] == pytest.approx(after["eval/accuracy"])
    assert report["tool_use"] == pytest.approx(after["eval/tool_use"])  # arithmetic offers the calculator
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 24
    assert Path(out / "traces.db").is_file()


def test_eval_says_how_many_episodes_called_a_tool_where_one_was_offered(tmp_path):
    out = tmp_path / "eval"
    proc = subprocess.run([sys.executable, "-m", "tracerl.cli.main", "eval", "calculator", "--max-examples", "8",
                           "--temperature", "1", "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    called = sum(any(s["output_message"].get("tool_calls") for t in e["trajectories"] for s in t["steps"]
                     if s["output_message"]) for e in episodes)
    share = json.loads((out / "report.json").read_text())["tool_use"]
    assert share == pytest.approx(called / len(episodes))
    assert re.search(rf"episodes calling a tool\s*│\s*{re.escape(f'{share:.1%}')}", proc.stdout), proc.stdout


def test_eval_of_a_hosted_model_through_litellm_equals_serving_it_locally(tmp_path):
    """--litellm-model: LiteLLM forwards each call to the provider; here the "provider" is the
    tiny model behind a gateway in another process, so the accuracy must equal a local eval."""
    pytest.importorskip("litellm")
    from tracerl.gateway.child import GatewayProcess
    from tracerl.models import tiny_model_path

    cmd = [sys.executable, "-m", "tracerl.cli.main", "eval", "arithmetic", "--max-examples", "12"]
    env = {**os.environ, "HOSTED_KEY": "sk-test"}
    local = subprocess.run([*cmd, "--output", str(tmp_path / "local")], capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    with GatewayProcess(tiny_model_path(), tmp_path / "provider.db", log_path=tmp_path / "provider.log") as provider:
        hosted = subprocess.run([*cmd, "--output", str(tmp_path / "hosted"), "--litellm-model", "openai/tracerl-tiny",
                                 "--base-url", provider.url + "/v1", "--api-key-env", "HOSTED_KEY"],
                                capture_output=True, text=True, timeout=300, env=env)
    assert hosted.returncode == 0, hosted.stderr
    reports = [json.loads((tmp_path / d / "report.json").read_text()) for d in ("local", "hosted")]
    assert reports[0]["accuracy"] == reports[1]["accuracy"]
    # the hosted API returns text only: the episodes say so (usable for eval and SFT, not RL)
    assert reports[1]["termination_reasons"] == {"missing_token_ids": 12}
    episodes = [json.loads(x) for x in (tmp_path / "hosted" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 12 and all(ep["trajectories"] for ep in episodes)
    both = subprocess.run([*cmd, "--model", "x", "--litellm-model", "openai/y"], capture_output=True, text=True)
    assert both.returncode != 0 and "pass one of them" in both.stderr


def test_accuracy_and_reward_are_over_graded_episodes_and_none_when_nothing_graded():
    """No reward is not 0 %: an episode that ran and that nothing graded is counted apart; one
    that raised is wrong, whatever would have graded it."""
    from tracerl.trainers.metrics import episode_metrics

    ungraded = [Episode(id=f"u{i}", task=Task(id="c")) for i in range(2)]
    crashed = Episode(id="x", task=Task(id="d"), termination_reason=TerminationReason.ERROR)
    eps = [_ep("a", 0, True), _ep("b", 0, False), crashed, *ungraded]
    report = EvalReport.from_episodes(eps, n=1, ks=[1])
    assert (report.ungraded, report.graded_count) == (2, 3)
    assert report.accuracy == pytest.approx(1 / 3) and report.pass_at[1][0] == pytest.approx(1 / 3)
    assert report.reward_mean == pytest.approx(1 / 3)  # the crash's 0 is in it, the ungraded are not
    assert report.step_metrics() == {"eval/accuracy": pytest.approx(1 / 3), "eval/reward_mean": pytest.approx(1 / 3),
                                     "eval/judged_by_reward_max": 0.0, "eval/ungraded": 2.0}
    metrics = episode_metrics(eps, prefix="eval")
    assert metrics["eval/accuracy"] == pytest.approx(1 / 3) and metrics["eval/ungraded"] == 2.0

    none = EvalReport.from_episodes(ungraded, n=1, ks=[1])
    assert none.accuracy is None and none.reward_mean is None and none.pass_at == {}
    assert none.step_metrics() == {"eval/judged_by_reward_max": 0.0, "eval/ungraded": 2.0}
    assert none.not_measured().startswith("not measured: none of its 2 episodes has a reward")
    metrics = episode_metrics(ungraded)
    assert not {"rollout/accuracy", "rollout/reward_mean", "rollout/reward_std"} & set(metrics)
    assert metrics["rollout/ungraded"] == 2.0


def test_an_evaluation_nothing_graded_prints_not_measured_never_a_zero(capsys):
    from rich.console import Console

    from tracerl.trainers.config import TrainConfig
    from tracerl.trainers.progress import Progress

    cfg = TrainConfig(steps=2, progress=True)
    progress = Progress(cfg, Console(force_terminal=False, width=200))
    progress.evaluated(0, EvalReport.from_episodes([Episode(id=f"u{i}", task=Task(id="c")) for i in range(3)], n=1))
    progress.evaluated(2, EvalReport.from_episodes([_ep("a", 0, True), Episode(id="u", task=Task(id="c"))], n=1))
    progress.close()
    out = capsys.readouterr().out
    assert "held-out accuracy before training: not measured: none of its 3 episodes has a reward" in out
    assert "held-out accuracy after training: 100.0% of 1 graded episodes (1 without a reward)" in out
    assert not re.search(r"(?<![\d.])0\.0%", out)


def test_timeout_advice_names_the_measured_rate_and_the_settings_to_change():
    from tracerl.core.types import Step, Trajectory
    from tracerl.trainers.metrics import timeout_advice

    answered = Episode(id="a", trajectories=[Trajectory(steps=[Step(id="s", response_ids=list(range(30)))])])
    late = [_ep("t", i, False, TerminationReason.TIMEOUT) for i in range(3)]
    assert timeout_advice([answered], 10.0, 4, 96, 120.0) is None  # none timed out: nothing to say
    advice = timeout_advice([answered, *late], 10.0, 4, 96, 120.0)
    assert advice is not None
    # 30 response tokens in 10 s: 3.0 tokens/s, and each of the three settings with its value
    assert advice.startswith("3 of 4 episodes timed out: the engine answered 3.0 tokens/s (30 response tokens in 10.0 s)")
    assert "`concurrency` (4)" in advice and "`max_tokens` (96)" in advice and "`timeout_s` (120)" in advice


def test_an_evaluation_whose_episodes_time_out_warns_once_with_the_fix(tracing, caplog):
    import time

    import tracerl
    from tracerl.testing import ScriptedServer
    from tracerl.trainers.evaluate import evaluate

    @tracerl.rollout(timeout_s=0.5)
    def agent(task, config):
        config.openai_client().chat.completions.create(model=config.model, messages=[])

    with ScriptedServer(lambda messages, tools: time.sleep(1.5) or "late", tracer_provider=tracing.provider) as server:
        settings = tracerl.RolloutSettings(gateway_url=server.url, model="scripted", max_tokens=64)
        with caplog.at_level("WARNING", logger="tracerl.trainers.evaluate"):
            report = evaluate(agent, [Task(id=f"t{i}") for i in range(3)], settings, tracing=tracing, concurrency=8)
    assert report.reasons == {"timeout": 3}
    warned = [r.getMessage() for r in caplog.records if r.name == "tracerl.trainers.evaluate"]
    assert len(warned) == 1 and warned[0].startswith("evaluation: 3 of 3 episodes timed out: the engine answered")
    assert "`concurrency` (8)" in warned[0] and "`max_tokens` (64)" in warned[0] and "`timeout_s` (0.5)" in warned[0]
