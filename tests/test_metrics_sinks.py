"""Where training metrics go: metrics.jsonl, TensorBoard event files and an MLflow run, each
read back with the backend's own reader."""

from __future__ import annotations

import json
import math
import time

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


def _wandb_history(raw: bytes) -> list[dict]:
    """The history rows of a W&B run file: a 7-byte header, then LevelDB-log records (32 KiB
    blocks of [crc32, length, type] + payload; type 1 whole, 2-4 first/middle/last part)
    holding wandb_internal Record protobufs. wandb 0.31 ships no Python reader for it."""
    import struct

    from wandb.proto import wandb_internal_pb2

    rows, pos, part = [], 7, b""
    while pos + 7 <= len(raw):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _, size, kind = struct.unpack("<IHB", raw[pos:pos + 7])
        if kind == 0:
            break
        part, pos = part + raw[pos + 7:pos + 7 + size], pos + 7 + size
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(part)
            part = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
    return rows


def test_wandb_offline_run_gets_the_metrics_and_is_finished(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")  # nothing leaves the machine; `wandb sync` uploads later
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    cfg = TrainConfig(output=tmp_path / "run", tensorboard=False, wandb_project="tracerl-test")
    _log_two_steps(MetricsLogger(cfg.output, cfg))
    (run_file,) = (tmp_path / "wandb").glob("offline-run-*/*.wandb")  # what `wandb sync` would upload
    # wandb's service process writes the file on its own: under load it lands just after finish()
    deadline = time.monotonic() + 20
    while True:
        history = [(int(h["_step"]), h["rollout/reward_mean"]) for h in _wandb_history(run_file.read_bytes())]
        if len(history) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert history == [(1, 0.25), (2, 0.75)]
    assert wandb.run is None  # finished


def test_trackio_run_gets_the_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))  # read when trackio is first imported
    pytest.importorskip("trackio")
    import trackio.sqlite_storage
    import trackio.utils

    for module in (trackio.utils, trackio.sqlite_storage):  # imported already by an earlier test
        monkeypatch.setattr(module, "TRACKIO_DIR", tmp_path / "trackio")
    from trackio.sqlite_storage import SQLiteStorage

    cfg = TrainConfig(output=tmp_path / "run", tensorboard=False, trackio_project="tracerl-test")
    _log_two_steps(MetricsLogger(cfg.output, cfg))
    logs = SQLiteStorage.get_logs("tracerl-test", "run")
    assert [(m["step"], m["rollout/reward_mean"], m["loss/policy"]) for m in logs] == [(1, 0.25, 0.5), (2, 0.75, -0.1)]
    assert all("stats/nan" not in m for m in logs)
    assert (tmp_path / "trackio" / "tracerl-test.db").is_file()
