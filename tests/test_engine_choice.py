"""``engine: torch | vllm | openai``: impossible combinations are one line before any model
loads, and the openai engine's weight sync speaks vLLM's routes in the documented order."""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import torch

from tracerl.cli.main import main
from tracerl.core.errors import ConfigError, UpstreamError
from tracerl.trainers import serving
from tracerl.trainers.config import TrainConfig


def _cfg(tmp_path, **kw: Any) -> TrainConfig:
    return TrainConfig.model_validate({"output": tmp_path / "run", **kw})


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_engine_vllm_without_vllm_names_the_extra(tmp_path, capsys):
    assert main(["train", "arithmetic", "--engine", "vllm", "--output", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "engine=vllm needs vLLM" in err and "pip install 'tracerl[gpu]'" in err
    assert not (tmp_path / "run").exists()  # checked before anything was written


@pytest.mark.parametrize(("settings", "device", "message"), [
    ({"engine": "openai"}, "cpu", "pass its base URL with --set upstream.url="),
    ({"engine": "openai", "upstream": {"url": "http://127.0.0.1:1/v1"}, "engine_process": True}, "cpu",
     "engine_process runs TorchEngine"),
])
def test_impossible_engine_combinations_are_one_line(tmp_path, settings, device, message):
    with pytest.raises(ConfigError, match=message):
        serving.check(_cfg(tmp_path, **settings), device)


def _as_if_vllm(monkeypatch, version: str) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # as if vLLM were installed
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version)


def test_engine_vllm_on_a_cpu_says_it_needs_cuda(tmp_path, monkeypatch):
    _as_if_vllm(monkeypatch, "0.33.0")
    with pytest.raises(ConfigError, match="needs a CUDA GPU and this run's device is cpu"):
        serving.check(_cfg(tmp_path, engine="vllm"), "cpu")


@pytest.mark.parametrize("version", ["0.32.1", "0.34.0", "1.0.0"])
def test_an_unchecked_vllm_version_is_one_line_naming_the_supported_range(tmp_path, monkeypatch, version):
    _as_if_vllm(monkeypatch, version)
    with pytest.raises(ConfigError, match=rf"vLLM {re.escape(version)} is installed.*vllm>=0.33,<0.34"):
        serving.check(_cfg(tmp_path, engine="vllm"), "cuda")


def test_any_release_of_the_checked_minor_version_passes():
    from tracerl.engines.vllm_engine import check_version

    for version in ("0.33.0", "0.33.1", "0.33.0rc1.dev5"):
        check_version(version)


class _VLLMRoutes:
    """vLLM's dev-mode RL routes as a recording HTTP server on 127.0.0.1."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        routes = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                routes.calls.append((self.path, json.loads(body) if body else None))
                status = 404 if fail and self.path.startswith(fail) else 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()


def test_disk_weight_sync_writes_loadable_weights_then_pauses_reloads_resets_resumes(tmp_path):
    from safetensors.torch import load_file

    from tracerl.engines.upstream import UpstreamEngine

    server = _VLLMRoutes()
    try:
        engine = UpstreamEngine(server.url, "m", weight_sync="disk", weights_dir=str(tmp_path / "w"))
        shared = torch.randn(4, 3)
        engine.update_weights({"embed.weight": shared, "lm_head.weight": shared, "norm.weight": torch.ones(3)}, 5)
    finally:
        server.close()
    assert [path for path, _ in server.calls] == ["/pause?mode=wait", "/collective_rpc", "/reset_prefix_cache",
                                                  "/resume"]
    assert server.calls[1][1] == {"method": "reload_weights", "kwargs": {"weights_path": str(tmp_path / "w")}}
    saved = load_file(str(tmp_path / "w" / "model.safetensors"))
    assert set(saved) == {"embed.weight", "norm.weight"}  # a tied weight once, as vLLM loads it
    assert torch.equal(saved["embed.weight"], shared)
    assert engine.weight_version == 5


def test_disk_weight_sync_writes_the_engines_dtype(tmp_path):
    """Under bf16-mixed the trainer's weights are float32 and vLLM runs bfloat16: the file is
    bfloat16, half the bytes to write and read every step."""
    from safetensors.torch import load_file

    from tracerl.engines.upstream import UpstreamEngine

    server = _VLLMRoutes()
    try:
        engine = UpstreamEngine(server.url, "m", weight_sync="disk", weights_dir=str(tmp_path / "w"),
                                weights_dtype="bfloat16")
        weight = torch.randn(4, 3)
        engine.update_weights({"embed.weight": weight, "steps": torch.tensor([3])}, 1)
    finally:
        server.close()
    saved = load_file(str(tmp_path / "w" / "model.safetensors"))
    assert saved["embed.weight"].dtype == torch.bfloat16 and torch.equal(saved["embed.weight"], weight.bfloat16())
    assert saved["steps"].dtype == torch.int64  # only floating-point tensors are cast


def test_a_server_without_dev_mode_routes_fails_the_sync_naming_the_fix(tmp_path):
    from tracerl.engines.upstream import UpstreamEngine

    server = _VLLMRoutes(fail="/collective_rpc")
    try:
        engine = UpstreamEngine(server.url, "m", weight_sync="disk", weights_dir=str(tmp_path / "w"))
        with pytest.raises(UpstreamError, match="VLLM_SERVER_DEV_MODE=1"):
            engine.update_weights({"w": torch.ones(2)}, 1)
    finally:
        server.close()
    assert engine.weight_version == 0  # the server did not take them


def test_weights_go_to_vllm_in_bounded_buckets_in_order():
    """What each update_weights call to vLLM carries (tracerl.engines.vllm_engine; vLLM itself
    is checked by bench/vllm_contract.py): every tensor once, in order, at most the limit per
    call unless one tensor alone is larger."""
    from tracerl.engines.vllm_engine import buckets, ipc_update_info

    state = {"a": torch.zeros(256), "b": torch.zeros(256), "big": torch.zeros(2048), "c": torch.zeros(2, 3)}
    runs = list(buckets(state, limit_bytes=2048))  # float32: a and b are 1 KiB each, big 8 KiB
    assert [[n for n, _ in run] for run in runs] == [["a", "b"], ["big"], ["c"]]
    info = ipc_update_info(runs[2], [{"GPU-x": ("args",)}])
    assert info == {"names": ["c"], "dtype_names": ["float32"], "shapes": [[2, 3]], "ipc_handles": [{"GPU-x": ("args",)}]}
    assert [n for run in buckets(state, 1) for n, _ in run] == list(state)
