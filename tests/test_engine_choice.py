"""``engine: torch | vllm | openai``: impossible combinations are one line before any model
loads, and the openai engine's weight sync speaks vLLM's routes in the documented order."""

from __future__ import annotations

import importlib.util
import json
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


def test_engine_vllm_on_a_cpu_says_it_needs_cuda(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # as if vLLM were installed
    with pytest.raises(ConfigError, match="needs a CUDA GPU and this run's device is cpu"):
        serving.check(_cfg(tmp_path, engine="vllm"), "cpu")


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
