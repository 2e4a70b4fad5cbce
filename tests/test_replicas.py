"""Gateways as replicas, in one process: the weights a trainer sends over HTTP (safetensors with
tied weights), the /admin/weights route's refusals, and the one line `tracerl train --gateway`
gives for a gateway that cannot serve the run."""

from __future__ import annotations

import re

import httpx
import pytest
import torch
from transformers import AutoModelForCausalLM

from tracerl.core.errors import ConfigError, GatewayProcessError
from tracerl.core.store import SpanStore
from tracerl.engines import weights_file
from tracerl.engines.torch_engine import TorchEngine
from tracerl.gateway import GatewayServer
from tracerl.models import tiny_model_path
from tracerl.trainers.replicas import Replicas


@pytest.fixture(scope="module")
def engine():
    eng = TorchEngine(batch_window_ms=1)
    yield eng
    eng.shutdown()


def _shifted() -> dict[str, torch.Tensor]:
    """The served model's weights, each moved by a step the test can see arrive."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    model.tie_weights()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    return model.state_dict()


def test_tied_weights_cross_a_safetensors_file_whole(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    state = model.state_dict()
    tied = [k for k in state if k != "model.embed_tokens.weight" and
            state[k].data_ptr() == state["model.embed_tokens.weight"].data_ptr()]
    assert tied, "the bundled model ties its embeddings: the case this file exists for"
    weights_file.save(state, tmp_path / "w.safetensors", dtype="bfloat16")
    back = weights_file.load(tmp_path / "w.safetensors")
    assert set(back) == set(state)
    assert back[tied[0]].data_ptr() == back["model.embed_tokens.weight"].data_ptr()  # tied again, not copied
    assert back[tied[0]].dtype == torch.bfloat16
    model.load_state_dict(back, strict=True)


def test_a_gateway_that_accepts_weights_serves_them_and_says_so(tmp_path, engine):
    store = SpanStore(tmp_path / "traces.db")
    with GatewayServer(engine, store, api_key="k", accept_weights=True) as gw:
        replicas = Replicas([gw.url], api_key="k", store=store, model=engine.model_name)
        replicas.check()
        replicas.update_weights(_shifted(), 7)
        health = httpx.get(f"{gw.url}/health").json()
        assert health["weight_version"] == 7 and replicas.weight_version == 7
        served = engine.model.state_dict()["model.norm.weight"]
        expected = AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict()["model.norm.weight"] + 0.01
        assert torch.allclose(served.float(), expected, atol=1e-6)

        no_key = httpx.post(f"{gw.url}/admin/weights", params={"version": 8}, content=b"x")
        assert no_key.status_code == 401
        auth = {"Authorization": "Bearer k"}
        no_version = httpx.post(f"{gw.url}/admin/weights", content=b"x", headers=auth)
        assert no_version.status_code == 400 and "version" in no_version.json()["error"]["message"]
        garbage = httpx.post(f"{gw.url}/admin/weights", params={"version": 8}, content=b"not weights", headers=auth)
        assert garbage.status_code == 400 and "not a safetensors file" in garbage.json()["error"]["message"]
        weights_file.save({"other.weight": torch.zeros(2)}, tmp_path / "other.safetensors")
        wrong = httpx.post(f"{gw.url}/admin/weights", params={"version": 8},
                           content=(tmp_path / "other.safetensors").read_bytes(), headers=auth)
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "weights_mismatch"
        assert httpx.get(f"{gw.url}/health").json()["weight_version"] == 7  # nothing half-loaded


def test_a_gateway_without_accept_weights_refuses_them(tmp_path, engine):
    store = SpanStore(tmp_path / "traces.db")
    with GatewayServer(engine, store) as gw:
        answer = httpx.post(f"{gw.url}/admin/weights", params={"version": 1}, content=b"x")
        assert answer.status_code == 403 and "--accept-weights" in answer.json()["error"]["message"]
        with pytest.raises(ConfigError, match="takes no weights.*--accept-weights"):
            Replicas([gw.url], api_key=None, store=store, model=engine.model_name).check()


def test_check_names_the_gateway_that_cannot_serve_the_run(tmp_path, engine):
    ours, theirs = SpanStore(tmp_path / "ours.db"), SpanStore(tmp_path / "theirs.db")
    with GatewayServer(engine, theirs, accept_weights=True) as gw:
        with pytest.raises(ConfigError, match=f"--gateway {gw.url} writes another span store"):
            Replicas([gw.url], api_key=None, store=ours, model=engine.model_name).check()
        with pytest.raises(ConfigError, match="serves model .* ask for 'other'.*--name other"):
            Replicas([gw.url], api_key=None, store=theirs, model="other").check()
        with pytest.raises(ConfigError, match="names one gateway twice"):
            Replicas([gw.url, gw.url + "/v1"], api_key=None, store=theirs, model=engine.model_name)
    with pytest.raises(ConfigError, match=f"--gateway {gw.url}: no tracerl gateway answers there"):
        Replicas([gw.url], api_key=None, store=ours, model=engine.model_name).check()
    with pytest.raises(GatewayProcessError, match="did not reach every gateway"):
        Replicas([gw.url], api_key=None, store=ours, model=engine.model_name).update_weights({"w": torch.zeros(1)}, 1)


def test_check_names_the_key_a_keyed_gateway_needs(tmp_path, engine, capsys):
    from tracerl.cli.main import main

    store = SpanStore(tmp_path / "traces.db")
    with GatewayServer(engine, store, api_key="k", accept_weights=True) as gw:
        needs = f"--gateway {gw.url} needs an API key (it was started with --api-key) and the run has none"
        for unset in (None, "tracerl"):  # rollout.api_key's default is the agents' placeholder key
            with pytest.raises(ConfigError, match=rf"{re.escape(needs)}.*--set rollout\.api_key=KEY"):
                Replicas([gw.url], api_key=unset, store=store, model=engine.model_name).check()
        with pytest.raises(ConfigError, match=rf"--gateway {re.escape(gw.url)} refused the run's API key "
                                              r"\(rollout\.api_key\): set --set rollout\.api_key=KEY"):
            Replicas([gw.url], api_key="wrong", store=store, model=engine.model_name).check()
        Replicas([gw.url], api_key="k", store=store, model=engine.model_name).check()

        argv = ["train", "arithmetic", "--gateway", gw.url, "--store", str(tmp_path / "traces.db"),
                "--output", str(tmp_path / "run"), "--eval-size", "0", "--steps", "1", "--quiet"]
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needs in err, err
        assert main([*argv, "--set", "rollout.api_key=wrong"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "refused the run's API key" in err, err


def test_one_store_id_by_any_path(tmp_path):
    with SpanStore(tmp_path / "a.db") as first:
        made = first.store_id()
    with SpanStore(tmp_path / ".." / tmp_path.name / "a.db") as again, \
            SpanStore(tmp_path / "a.db", read_only=True) as view, SpanStore(tmp_path / "b.db") as other:
        assert again.store_id() == made == view.store_id() and other.store_id() != made


@pytest.mark.parametrize(("extra", "said"), [
    (["--set", "async_staleness=1"], "--gateway with async_staleness > 0"),
    (["--engine", "vllm"], "--gateway: the gateways serve the rollouts with their own engines"),
    ([], "--gateway http://127.0.0.1:9: no tracerl gateway answers there"),
])
def test_train_with_a_gateway_it_cannot_use_is_one_line(extra, said, tmp_path, capsys):
    from tracerl.cli.main import main

    argv = ["train", "arithmetic", "--gateway", "http://127.0.0.1:9", "--output", str(tmp_path / "run"),
            "--eval-size", "0", "--steps", "1", "--quiet", *extra]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err, err


def test_gateway_serve_takes_weight_sync_only_in_front_of_an_upstream(capsys):
    from tracerl.cli.main import main
    from tracerl.gateway.server import free_port

    assert main(["gateway", "serve", "--weight-sync", "disk", "--port", str(free_port())]) == 1
    assert "--weight-sync go with --upstream" in capsys.readouterr().err
