"""The RL trainer end to end on the bundled tiny model: updates, failures, checkpoints, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checks import trainer_and_engine_logprobs

from tracerl.core.otel import setup_tracing
from tracerl.core.store import SpanStore

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tracerl.trainers import checkpoint  # noqa: E402
from tracerl.trainers.config import TrainConfig  # noqa: E402
from tracerl.trainers.loop import train  # noqa: E402
from tracerl.trainers.rollouts import load_agent  # noqa: E402

AGENTS = Path(__file__).parent / "rollout_agents.py"
ROOT = Path(__file__).parent.parent


def small(tmp_path: Path, **kw) -> TrainConfig:
    base = dict(output=tmp_path / "run", steps=2, batch_size=4, group_size=4, eval_size=0, progress=False,
                tensorboard=False, rollout={"max_tokens": 24, "timeout_s": 60})
    base.update(kw)
    return TrainConfig.model_validate(base)


@pytest.fixture
def private_tracing():
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    yield setup_tracing(use_store=False, tracer_provider=provider)
    provider.shutdown()


def weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


def test_training_updates_weights_checkpoints_and_stamps_versions(tmp_path, private_tracing):
    from transformers import AutoModelForCausalLM

    from tracerl.models import tiny_model_path

    cfg = small(tmp_path)
    result = train(cfg, agent=load_agent(f"{AGENTS}:parity_agent"), tracing=private_tracing)
    lines = [json.loads(x) for x in (cfg.output / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    assert all(m["update/sequences"] > 0 and m["stats/grad_norm"] > 0 for m in lines)
    assert lines[-1]["policy/weight_version"] == 2
    assert 0.1 < lines[-1]["memory/peak_rss_gb"] < 64  # this process's peak, in GiB
    assert json.loads((cfg.output / "config.json").read_text())["precision"] == "fp32"  # resolved, on CPU
    for key in ("rollout/reward_mean", "stats/entropy", "stats/clip_frac", "groups/zero_variance_share",
                "time/rollout_s", "throughput/update_tokens_per_s", "rollout/prefix_breaks", "memory/peak_rss_gb"):
        assert key in lines[-1], key
    # the engine's batching, per step: how many batches, how full, how long it generated
    for m in lines:
        assert m["engine/batches"] >= 1 and m["engine/rows_per_batch"] >= 1
        assert 0 < m["engine/busy_s"] <= m["time/rollout_s"]
    # the checkpoint is a Hugging Face model folder that differs from where training started
    final = result.final_checkpoint
    assert final is not None and final.name == "step-000002"
    model = AutoModelForCausalLM.from_pretrained(final)
    start = weights(tiny_model_path())
    changed = [k for k, v in weights(final).items() if not torch.equal(v, start[k])]
    assert changed and model.num_parameters() > 0
    # the gateway stamped step 2's calls with the weights of after step 1
    store = SpanStore(cfg.output / "traces.db")
    versions: dict[str, set[int]] = {}
    for span in store.spans():
        sid = span.attributes.get("tracerl.session.id", "")
        version = span.attributes.get("tracerl.llm.weight_version")
        if version is not None:
            versions.setdefault(sid.split("-")[1], set()).add(version)
    assert versions == {"s0": {0}, "s1": {1}}


def test_failing_and_hanging_agents_do_not_stop_training(tmp_path, private_tracing):
    cfg = small(tmp_path, steps=2, batch_size=8, group_size=4, rollout={"max_tokens": 16, "timeout_s": 2})
    result = train(cfg, agent=load_agent(f"{AGENTS}:flaky_agent"), tracing=private_tracing)
    totals: dict[str, float] = {}
    for m in result.history:
        for key in ("episodes/error", "episodes/timeout", "episodes/excluded", "episodes/success"):
            totals[key] = totals.get(key, 0) + m.get(key, 0)
    assert totals["episodes/error"] >= 1 and totals["episodes/timeout"] >= 1
    assert totals["episodes/excluded"] == totals["episodes/error"] + totals["episodes/timeout"]
    assert totals["episodes/success"] + totals["episodes/excluded"] == 2 * 8 * 4
    assert all(m["update/sequences"] <= m["episodes/success"] for m in result.history)


def _cli(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tracerl.cli.main", "train", "arithmetic", "--agent", f"{AGENTS}:parity_agent",
            "--output", str(out), "--steps", "4", "--batch-size", "2", "--group-size", "4", "--eval-size", "0",
            "--threads", "1", "--quiet", "--set", "concurrency=1", "--set", "rollout.max_tokens=16",
            "--set", "tensorboard=false", "--set", "deterministic=true", *extra]


@pytest.mark.slow
def test_resume_after_sigkill_reproduces_the_parameters(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    subprocess.run(_cli(straight), check=True, env=env, capture_output=True, timeout=300)
    proc = subprocess.Popen(_cli(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while checkpoint.latest(killed / "checkpoints") is None or checkpoint.latest(killed / "checkpoints").name < "step-000002":
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    last = checkpoint.latest(killed / "checkpoints")
    assert last is not None and last.name < "step-000004"
    subprocess.run(_cli(killed, "--resume"), check=True, env=env, capture_output=True, timeout=300)
    a = weights(straight / "checkpoints" / "step-000004")
    b = weights(killed / "checkpoints" / "step-000004")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    start = weights(ROOT / "tracerl" / "models" / "tiny")
    assert any(not torch.equal(a[k], start[k]) for k in a)


def test_config_from_yaml_with_flag_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("steps: 7\nalgo: {type: grpo, scale_rewards: batch}\nloss: {kl_beta: 0.05}\n")
    cfg = TrainConfig.load(path, {"algo": {"type": "grpo"}, "loss": {"eps_high": 0.3}, "group_size": 2})
    assert cfg.steps == 7 and cfg.group_size == 2
    assert cfg.algo.type == "grpo" and cfg.algo.scale_rewards == "batch"
    assert cfg.loss.kl_beta == 0.05 and cfg.loss.eps_high == 0.3
    cfg = TrainConfig.load(path, {"algo": {"type": "rloo"}})
    assert cfg.algo.type == "rloo"


@pytest.mark.parametrize(("args", "message"), [
    (["--algo", "ppo2"], "--algo 'ppo2'"),
    (["--set", "optim.lr=-1"], "optim.lr"),
    (["--set", "nonsense"], "dotted.key=value"),
    (["--config", "/nonexistent.yaml"], "does not exist"),
    (["--agent", "no_such_module:fn"], "cannot be imported"),
])
def test_cli_errors_are_one_line(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "tracerl.cli.main", "train", "arithmetic", "--output",
                           str(tmp_path / "r"), "--eval-size", "0", "--steps", "1", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_dry_run_prints_the_resolved_config(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tracerl.cli.main", "train", "countdown", "--dry-run",
                           "--algo", "reinforce", "--group-size", "3", "--set", "loss.agg=seq_mean_token_sum"],
                          capture_output=True, text=True, timeout=60, check=True)
    cfg = json.loads(proc.stdout)
    assert cfg["task"] == "countdown" and cfg["algo"] == {"type": "reinforce", "baseline": "batch_mean"}
    assert cfg["group_size"] == 3 and cfg["loss"]["agg"] == "seq_mean_token_sum"


def test_lora_trains_adapters_only_and_saves_loadable_adapters(tmp_path, private_tracing):
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from tracerl.models import tiny_model_path
    from tracerl.trainers import lora

    cfg = small(tmp_path, lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
                optim={"lr": 1e-2})
    result = train(cfg, agent=load_agent(f"{AGENTS}:parity_agent"), tracing=private_tracing)
    final = result.final_checkpoint
    assert (final / "adapter_config.json").is_file() and (final / "adapter_model.safetensors").is_file()
    assert not (final / "model.safetensors").exists()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    loaded = peft.PeftModel.from_pretrained(base, str(final))
    merged = lora.merged_state_dict(loaded)
    reference = loaded.merge_and_unload().state_dict()
    assert merged.keys() == reference.keys()
    assert all(torch.allclose(merged[k], reference[k], atol=1e-6) for k in merged)
    start = weights(tiny_model_path())
    changed = {k for k in start if not torch.equal(merged[k], start[k])}
    assert changed and all(("q_proj" in k or "v_proj" in k) for k in changed)
    # the adapter checkpoint serves as a model: its base with the adapters folded in
    from tracerl.engines.torch_engine import TorchEngine
    from tracerl.trainers.model_path import resolve_model

    engine = TorchEngine(resolve_model(final), max_batch_size=4)
    try:
        served = engine.model.state_dict()
        assert all(torch.allclose(served[k], reference[k], atol=1e-6) for k in reference)
    finally:
        engine.shutdown()
    # resuming picks the adapters up again
    more = small(tmp_path, steps=3, resume=True, lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    again = train(more, agent=load_agent(f"{AGENTS}:parity_agent"), tracing=private_tracing)
    assert [m["step"] for m in again.history] == [3]
    assert (again.final_checkpoint / "adapter_config.json").is_file()


@pytest.mark.parametrize(("precision", "saved"), [("bf16-mixed", "float32"), ("bf16", "bfloat16")])
def test_bf16_precisions_generate_in_bfloat16(tmp_path, private_tracing, monkeypatch, precision, saved):
    from tracerl.engines import torch_engine

    dtypes: list[object] = []
    real_init = torch_engine.TorchEngine.__init__

    def spy(self, *args, **kw):
        real_init(self, *args, **kw)
        dtypes.append(self.model.dtype)

    monkeypatch.setattr(torch_engine.TorchEngine, "__init__", spy)
    cfg = small(tmp_path, precision=precision)
    result = train(cfg, agent=load_agent(f"{AGENTS}:parity_agent"), tracing=private_tracing)
    assert dtypes == [torch.bfloat16]
    assert all(abs(m["stats/ratio_mean"] - 1) < 0.05 and m["stats/grad_norm"] > 0 for m in result.history)
    # bf16-mixed keeps float32 master weights (autocast computes in bf16); bf16 stores bf16
    assert {str(v.dtype) for v in weights(result.final_checkpoint).values()} == {f"torch.{saved}"}


def test_the_precision_default_follows_the_device():
    from tracerl.trainers.precision import resolve

    assert resolve(None, "cuda:0") == "bf16-mixed" and resolve(None, "cpu") == "fp32"
    assert resolve("bf16", "cpu") == "bf16"
    with pytest.raises(ValueError, match="precision"):
        TrainConfig.model_validate({"precision": "fp16"})


def test_async_rollouts_stay_within_the_staleness_bound(tmp_path, private_tracing):
    cfg = small(tmp_path, steps=4, async_staleness=1)
    result = train(cfg, agent=load_agent(f"{AGENTS}:parity_agent"), tracing=private_tracing)
    stale = [m["async/staleness_mean"] for m in result.history]
    assert [m["step"] for m in result.history] == [1, 2, 3, 4]
    assert all(0 <= s <= 1 for s in stale) and max(stale) > 0  # some data came from the previous weights
    assert all(m["update/sequences"] > 0 for m in result.history)
    # async serves from a child process by default; its spans carry the pushed versions
    assert (cfg.output / "gateway.log").is_file()
    versions = {s.attributes.get("tracerl.llm.weight_version") for s in SpanStore(cfg.output / "traces.db").spans()}
    versions.discard(None)  # our own spans; the gateway's carry the version that sampled them
    # Step s starts once update s-2 has landed (staleness 1), so the last step samples from
    # version 2 at least; whether version 3 lands while it still runs is a race, not a promise.
    assert 0 in versions and max(versions) >= 2 and versions <= {0, 1, 2, 3}


def test_gateway_process_serves_new_weights_and_reports_failures(tmp_path):
    import openai
    from transformers import AutoModelForCausalLM

    from tracerl.gateway.child import GatewayProcess, GatewayProcessError
    from tracerl.models import tiny_model_path

    with GatewayProcess(tiny_model_path(), tmp_path / "t.db", log_path=tmp_path / "g.log") as gw:
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x")

        def ask() -> str:
            reply = client.chat.completions.create(model="tracerl-tiny", max_tokens=8, temperature=0,
                                                   messages=[{"role": "user", "content": "What is 2 + 3?"}])
            return reply.choices[0].message.content

        before = ask()
        state = AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict()
        gw.update_weights({k: torch.zeros_like(v) for k, v in state.items()}, 7)
        assert ask() != before  # all-zero weights: another answer, from version 7
        assert 7 in {s.attributes.get("tracerl.llm.weight_version") for s in SpanStore(tmp_path / "t.db").spans()}
        with pytest.raises(GatewayProcessError, match="loading weights"):
            gw.update_weights({"not.a.weight": torch.zeros(2)}, 8)
        proc = gw._proc
    assert proc.poll() is not None  # the child is gone
    with pytest.raises(GatewayProcessError, match="failed: .*nowhere"):
        GatewayProcess(tmp_path / "nowhere", tmp_path / "t.db", log_path=tmp_path / "g2.log").start()


def test_gateway_process_exits_when_the_trainer_is_killed(tmp_path):
    script = (
        "import time\n"
        "from tracerl.gateway.child import GatewayProcess\n"
        "from tracerl.models import tiny_model_path\n"
        f"gw = GatewayProcess(tiny_model_path(), {str(tmp_path / 't.db')!r}).start()\n"
        "print(gw._proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    trainer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = int(trainer.stdout.readline())
    trainer.send_signal(signal.SIGKILL)
    trainer.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(child_pid):
        time.sleep(0.2)
    assert not _alive(child_pid), "the gateway child outlived its trainer"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


@pytest.mark.slow
def test_rl_raises_held_out_accuracy_on_the_bundled_model(tmp_path, private_tracing):
    """The short variant of make demo (`tracerl train calculator`): held-out accuracy on
    two-digit problems rises clearly within a minute, as the model learns to call the tool."""
    cfg = TrainConfig.model_validate(dict(
        task="calculator", output=tmp_path / "run", steps=12, batch_size=8, group_size=8, eval_size=32, eval_every=0,
        progress=False, tensorboard=False, save_every=0, seed=1,
    ))
    result = train(cfg, tracing=private_tracing)
    assert result.accuracy_before is not None and result.accuracy_after is not None
    assert result.accuracy_after >= result.accuracy_before + 0.3, (result.accuracy_before, result.accuracy_after)
    rewards = [m["rollout/reward_mean"] for m in result.history]
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3
    tool_use = [m["rollout/tool_use"] for m in result.history]
    assert sum(tool_use[-3:]) / 3 > sum(tool_use[:3]) / 3  # what it learned: to call the calculator


def test_a_fresh_run_refuses_a_folder_with_checkpoints(tmp_path):
    from tracerl.core.errors import ConfigError

    old = tmp_path / "run" / "checkpoints" / "step-000003"
    old.mkdir(parents=True)
    (old / checkpoint.STATE_FILE).write_bytes(b"previous run")
    with pytest.raises(ConfigError, match="--resume"):
        train(small(tmp_path))
    assert (old / checkpoint.STATE_FILE).read_bytes() == b"previous run"
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_trainer_logprobs_match_the_engines_at_the_sampling_temperature(tiny_engine):
    """The importance ratio starts at 1: the trainer's log-probs of sampled tokens equal the
    engine's (same model, same temperature) to 1e-4."""
    from transformers import AutoModelForCausalLM

    from tracerl.models import tiny_model_path

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path()).eval()
    for temperature in (1.0, 0.7):
        mine, engines = trainer_and_engine_logprobs(tiny_engine, model, "What is 3 + 4?", temperature=temperature,
                                                    max_tokens=12, seed=5)
        assert torch.allclose(mine, engines, atol=1e-4), (mine, engines)


def test_activation_checkpointing_changes_memory_not_the_update(tmp_path):
    """The same rows, the same start: one update with activations recomputed in the backward
    pass lands on the same parameters as one that kept them."""
    import random
    from types import SimpleNamespace

    from tracerl.models import tiny_model_path
    from tracerl.trainers.batching import Row
    from tracerl.trainers.policy import checkpointing, load_policy
    from tracerl.trainers.update import make_optimizer, policy_update

    rng = random.Random(0)
    rows = []
    for _ in range(6):
        ids = [rng.randrange(500) for _ in range(41)]
        mask = [0] * 20 + [1] * 20
        rows.append(Row(ids[:-1], ids[1:], mask, [rng.choice((-1.0, 1.0)) * m for m in mask], None))
    params = []
    for on in (False, True):
        cfg = small(tmp_path, gradient_checkpointing=on, precision="fp32")
        policy = load_policy(cfg, str(tiny_model_path()), None, "cpu")
        assert any(getattr(m, "gradient_checkpointing", False) for m in policy.model.modules()) is on
        torch.manual_seed(0)
        optimizer, scheduler = make_optimizer(policy.model, cfg, 1)
        policy_update(policy.model, optimizer, scheduler, rows, cfg)
        params.append(dict(policy.model.named_parameters()))
    assert all(torch.allclose(params[0][k], params[1][k], atol=1e-6) for k in params[0])
    assert not checkpointing(small(tmp_path), policy.model)  # the bundled model: off by default
    assert checkpointing(small(tmp_path), SimpleNamespace(num_parameters=lambda: 1_500_000_000))
