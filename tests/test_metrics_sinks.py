"""Where training metrics go: metrics.jsonl, TensorBoard event files and an MLflow run, each
read back with the backend's own reader."""

from __future__ import annotations

import json
import math

import pytest

from tracerl.trainers.config import TrainConfig
from tracerl.trainers.metrics import MetricsLogger

STEPS = {1: {"rollout/reward_mean": 0.25, "loss/policy": 0.5}, 2: {"rollout/reward_mean": 0.75, "loss/policy": -0.1}}


def _log_two_steps(logger: MetricsLogger) -> None:
    for step, metrics in STEPS.items():
        logger.log(step, {**metrics, "stats/nan": math.nan, "note": "text"})  # non-finite and non-numbers dropped
    logger.close()


def test_jsonl_and_tensorboard_hold_the_same_values(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = TrainConfig(output=tmp_path / "run", tensorboard=True)
    _log_two_steps(MetricsLogger(cfg.output, cfg))
    lines = [json.loads(x) for x in (cfg.output / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["rollout/reward_mean"]) for m in lines] == [(1, 0.25), (2, 0.75)]
    assert all("stats/nan" not in m and "note" not in m for m in lines)
    events = EventAccumulator(str(cfg.output / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {"rollout/reward_mean", "loss/policy"}
    assert [(e.step, round(e.value, 6)) for e in events.Scalars("loss/policy")] == [(1, 0.5), (2, -0.1)]


def test_mlflow_run_gets_the_metrics_and_is_finished(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")  # no request leaves the machine
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a folder store: no database needed in tests
    cfg = TrainConfig(output=tmp_path / "run", tensorboard=False, mlflow_experiment="tracerl-test")
    _log_two_steps(MetricsLogger(cfg.output, cfg))
    client = mlflow.tracking.MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("tracerl-test").experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["algo"] == "grpo"
    history = client.get_metric_history(run.info.run_id, "rollout/reward_mean")
    assert [(m.step, m.value) for m in history] == [(1, 0.25), (2, 0.75)]


def test_a_failing_backend_does_not_stop_training(tmp_path, caplog):
    cfg = TrainConfig(output=tmp_path / "run", tensorboard=False)
    logger = MetricsLogger(cfg.output, cfg)
    from tracerl.trainers.metrics import _Sink

    def broken(step: int, metrics: dict[str, float]) -> None:
        raise ConnectionError("backend unreachable")

    logger._sinks.append(_Sink(broken, lambda: None))
    _log_two_steps(logger)
    assert len((cfg.output / "metrics.jsonl").read_text().splitlines()) == 2
    assert "backend unreachable" in caplog.text
