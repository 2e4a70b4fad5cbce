"""The one training config: a pydantic model, loadable from YAML, overridable by CLI flags.

    cfg = TrainConfig.load("run.yaml", overrides={"steps": 50, "algo": {"type": "rloo"}})

The advantage estimator is a discriminated union on ``type``; ``algo_by_agent`` picks another
one per agent name (e.g. the solver GRPO, the judge REINFORCE). Defaults are tuned to work
on the bundled tiny model on a laptop CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tracerl.core.errors import ConfigError
from tracerl.core.rollout import RolloutSettings
from tracerl.core.types import TerminationReason
from tracerl.tasks.data import DataConfig

from .precision import Precision


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class GRPO(_Config):
    """Group-relative advantages (https://arxiv.org/abs/2402.03300)."""

    type: Literal["grpo"] = "grpo"
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="divide by the group's reward std, the batch's, or not at all"
    )


class DrGRPO(_Config):
    """GRPO done right (https://arxiv.org/abs/2503.20783): no std scaling; pair with agg=constant."""

    type: Literal["dr_grpo"] = "dr_grpo"


class RLOO(_Config):
    """REINFORCE leave-one-out (https://arxiv.org/abs/2402.14740)."""

    type: Literal["rloo"] = "rloo"


class Reinforce(_Config):
    """Plain REINFORCE with an optional batch-mean baseline."""

    type: Literal["reinforce"] = "reinforce"
    baseline: Literal["none", "batch_mean"] = Field("batch_mean", description="reward baseline")


class ReinforcePP(_Config):
    """REINFORCE++ baseline (https://arxiv.org/abs/2501.03262): group mean, batch std."""

    type: Literal["reinforce_pp"] = "reinforce_pp"


class RFT(_Config):
    """Rejection-sampling fine-tuning: a supervised loss on the trajectories that pass a bar."""

    type: Literal["rft"] = "rft"
    min_reward: float = Field(1.0, description="keep trajectories whose reward is at least this")
    best_of_group: bool = Field(True, description="keep only the best passing sample of each group")
    retokenize: bool = Field(
        True, description="from traces: steps without token ids (recorded without a gateway) or with another "
        "tokenizer's get ids from the policy's chat template, counted and announced (true, the default); false "
        "drops their episodes, counted. Never applies to steps carrying the policy's own ids")


Algo = Annotated[GRPO | DrGRPO | RLOO | Reinforce | ReinforcePP | RFT, Field(discriminator="type")]
# every ``type`` the union accepts, read off it so that a new estimator shows up in --algo's help
ALGO_NAMES: tuple[str, ...] = tuple(
    cls.model_fields["type"].default for cls in get_args(get_args(Algo)[0])
)


class LossConfig(_Config):
    """The clipped policy-gradient loss (see tracerl.trainers.losses)."""

    eps_low: float = Field(0.2, ge=0, le=1, description="clip the ratio below at 1 - eps_low")
    eps_high: float = Field(0.28, ge=0, description="clip the ratio above at 1 + eps_high (DAPO)")
    agg: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "constant"] = Field(
        "token_mean", description="how token losses become one number; constant = Dr.GRPO"
    )
    kl_beta: float = Field(0.0, ge=0, description="weight of the k3 KL to the initial policy (0 = off)")
    tis_cap: float | None = Field(
        2.0, gt=0, description="cap of the truncated importance weight against the engine's logprobs"
    )
    gamma: float = Field(1.0, ge=0, le=1, description="discount of per-step rewards across turns")


class OptimConfig(_Config):
    """AdamW with warmup and a schedule; micro-batches packed to a token budget."""

    lr: float = Field(3e-4, gt=0, description="peak learning rate")
    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(2, ge=0, description="linear warmup, in optimizer steps")
    schedule: Literal["constant", "cosine", "linear"] = Field("constant", description="after warmup")
    grad_clip: float | None = Field(1.0, gt=0, description="max global grad norm (None = off)")
    micro_batch_tokens: int = Field(8192, ge=64, description="token budget of one forward/backward")
    micro_batch_logits: int | None = Field(
        None, ge=2**16, description="and at most this many logits (tokens x vocabulary) per micro-batch: the "
        "logits, their float32 copy and their gradient are each this size, so a real vocabulary gets smaller "
        "micro-batches. Default 2^26 on CPU (256 MiB of floats; SmolLM2's 49,152: 1,365 tokens; measured 3.7 "
        "GiB peak instead of 12.8 at 8,192, and faster), 2^29 on GPUs (2 GiB; a 151,936 vocabulary: 3,533)")
    epochs: int = Field(1, ge=1, description="passes over each rollout batch (>1 = PPO-style reuse)")


class LoraSettings(_Config):
    """Train low-rank adapters instead of all weights (needs tracerl[lora], i.e. peft)."""

    r: int = Field(16, ge=1, description="adapter rank")
    alpha: float = Field(32, gt=0, description="scale numerator: the update is alpha / r * B @ A")
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] | str = Field("all-linear", description="module names, or all-linear")


class VLLMSettings(_Config):
    """vLLM colocated on the trainer's GPU (``engine: vllm``)."""

    gpu_memory_utilization: float = Field(0.3, gt=0, lt=1, description="share of GPU memory vLLM may take")
    max_model_len: int | None = Field(None, ge=16, description="context length (default: the model's)")
    sleep: bool = Field(True, description="free vLLM's GPU memory during each update (sleep mode); "
                        "only when rollouts wait for the update (async_staleness 0)")
    enforce_eager: bool = Field(False, description="no CUDA graphs (faster start, slower decoding)")


class UpstreamSettings(_Config):
    """An OpenAI-compatible server you run, that returns token ids and logprobs (``engine: openai``)."""

    url: str | None = Field(None, description="its base URL, e.g. http://127.0.0.1:8000/v1")
    model: str | None = Field(None, description="the model name it serves (default: the run's --model)")
    api_key_env: str | None = Field(None, description="environment variable holding its API key")
    weight_sync: Literal["disk", "none"] = Field(
        "disk", description="disk: after each update the weights are written to the run folder and the server "
        "reloads them (vLLM's /collective_rpc reload_weights, VLLM_SERVER_DEV_MODE=1); none: it serves fixed "
        "weights (evaluation, collecting traces)")


class TrainConfig(_Config):
    """Everything one ``tracerl train`` run needs."""

    task: str = Field("arithmetic", description="task name in the registry (tracerl tasks list); "
                      "\"data\" when data is given")
    data: DataConfig | None = Field(None, description="the user's own tasks (--data): a file, a datasets "
                                    "folder, hf:org/name, or module:fn; overrides task")
    eval_task: str | None = Field(None, description="evaluate on this registered task's test split instead of "
                                  "the task's own (train on deepscaler, evaluate on aime24); it must share "
                                  "the task's default agent unless agent is set")
    agent: str | None = Field(
        None, description="rollout function as module:fn or path/file.py:fn (default: the task's agent)"
    )
    reward: str | None = Field(
        None, description="reward function grading what the agent returns: a built-in grader (exact, numeric, "
        "math, regex, contains, json, code, judge) or module:fn / path/file.py:fn (default: the task's, else the "
        "agent's own returned reward)")
    reward_options: dict[str, Any] = Field(
        default_factory=dict, description="options of a built-in grader, e.g. {pattern: 'Answer: (\\d+)'} for regex")
    reward_max: float = Field(
        1.0, description="the best reward: where the reward function gives no is_correct, an episode counts as "
        "correct for accuracy when its reward reaches this (the built-in graders and tasks give is_correct)")
    max_grading_errors: float = Field(
        0.1, ge=0, le=1, description="stop the run when more than this share of a step's or an evaluation's "
        "episodes could not be graded (the reward function raised or returned no number)")
    model: str | None = Field(None, description="HF model path or hub id (default: the bundled tiny model)")
    from_traces: Path | None = Field(
        None, description="train on exported traces (traces.db or spans .jsonl) instead of live rollouts; "
        "needs algo rft"
    )
    output: Path = Field(Path("runs/train"), description="run folder: checkpoints, metrics, traces")
    store: str | None = Field(
        None, description="span store shared by runs: a SQLite path or postgresql://user:password@host:port/db "
        "(default: $TRACERL_STORE, else the run folder's traces.db); the run's episodes are told apart by run_id")
    run_id: str | None = Field(
        None, description="the run's id on its spans (tracerl.run.id), by which a shared store tells runs apart "
        "(default: the output folder's name and 8 random hex digits; --resume keeps the run's)")
    seed: int = Field(0, description="seeds task order, sampling seeds and torch")
    steps: int = Field(40, ge=1, description="training steps (one rollout batch + update each)")
    batch_size: int = Field(16, ge=1, description="tasks per step (episodes per step with from_traces)")
    group_size: int = Field(8, ge=1, description="rollouts per task (G)")
    concurrency: int = Field(32, ge=1, description="rollouts in flight at once")
    rollout_workers: int = Field(
        0, ge=0, description="run the rollout function in this many Ray worker processes instead of rank 0's "
        "threads ([ray] extra; 0 = threads, no Ray); concurrency is then split among them")
    ray_address: str | None = Field(
        None, description="the Ray cluster for rollout_workers (HOST:PORT, or 'auto'); default: start one on this "
        "machine for the run")
    ray_connect_timeout_s: float = Field(
        30.0, gt=0, le=600, description="how long ray_address may take to answer a TCP connect before the run "
        "stops with one line (Ray itself retries an unreachable cluster for good)")
    gateways: list[str] = Field(
        default_factory=list, description="serve rollouts from these running gateways (tracerl gateway serve "
        "--accept-weights, each with its own engine) instead of one of the run's own: episodes spread over them, "
        "new weights go to every one before the next step, and they must write the run's --store")
    async_staleness: int = Field(
        0, ge=0, le=8, description="0 = sync; k = roll out ahead while updating, data at most k versions old"
    )
    engine_process: bool | None = Field(
        None, description="serve rollouts from a child process (gateway + engine), so they and the update "
        "run on different cores without sharing the interpreter lock; None = when async_staleness > 0"
    )
    engine: Literal["torch", "vllm", "openai"] = Field(
        "torch", description="what serves rollouts: torch (TorchEngine, CPU or GPU), vllm (colocated on the "
        "trainer's GPU, [gpu] extra) or openai (your own server, see upstream)")
    vllm: VLLMSettings = Field(default_factory=VLLMSettings)
    upstream: UpstreamSettings = Field(default_factory=UpstreamSettings)
    algo: Algo = Field(default_factory=GRPO, description="advantage estimator (by type)")
    algo_by_agent: dict[str, Algo] = Field(
        default_factory=dict, description="estimator per agent (trajectory) name, overriding algo"
    )
    group_by: Literal["task_agent", "task"] = Field(
        "task_agent", description="whose rewards an agent's advantage is measured against: its own in the same "
        "task (per-agent normalisation, Dr. MAS) or every agent's in the task pooled (vanilla multi-agent GRPO; "
        "one estimator for all agents)")
    group_samples: Literal["trajectory", "call"] = Field(
        "trajectory", description="one sample of a group's baseline and scale: a trajectory (its return from the "
        "start) or each call (its return-to-go, so an agent called 3 times weighs 3, as in Dr. MAS's code)")
    loss: LossConfig = Field(default_factory=LossConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    lora: LoraSettings | None = Field(None, description="train LoRA adapters (None = all weights)")
    rollout: RolloutSettings = Field(
        default_factory=lambda: RolloutSettings(max_tokens=96, timeout_s=120.0),
        description="sampling and timeouts of the agent's calls (gateway_url is set by the trainer)",
    )
    drop_zero_variance: bool = Field(True, description="leave out groups whose rewards are all equal")
    exclude: list[TerminationReason] = Field(
        default_factory=lambda: [
            TerminationReason.ERROR, TerminationReason.TIMEOUT, TerminationReason.CANCELLED,
            TerminationReason.NO_LLM_CALLS, TerminationReason.MISSING_TOKEN_IDS, TerminationReason.GRADING_ERROR,
        ],
        description="episodes ending so are counted and left out of the update",
    )
    max_failed_steps: int = Field(
        2, ge=1, description="stop the run when every rollout of this many steps in a row failed "
        "(error, timeout or cancelled): the agent is broken, and training on nothing helps no one"
    )
    eval_size: int = Field(64, ge=0, description="held-out tasks for accuracy (0 = no eval)")
    eval_every: int = Field(10, ge=0, description="evaluate every N steps (0 = first and last only)")
    eval_temperature: float = Field(0.0, ge=0, description="sampling temperature of the eval")
    save_every: int = Field(1, ge=0, description="checkpoint every N steps (0 = only at the end)")
    keep_checkpoints: int = Field(2, ge=1, description="checkpoints kept on disk")
    resume: bool = Field(False, description="continue from the latest checkpoint in output")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (default: torch's choice)")
    deterministic: bool = Field(
        False, description="bitwise-reproducible math (MKL strict CNR, deterministic torch kernels); "
        "with concurrency=1 a resumed run then equals an uninterrupted one. Slower."
    )
    device: str | None = Field(None, description="cpu, cuda, ... (default: cuda when available)")
    gradient_checkpointing: bool | None = Field(
        None, description="recompute activations in the backward pass instead of keeping them: about a third "
        "more update compute for most of the activation memory (default: on above 1B parameters)")
    precision: Precision | None = Field(
        None, description="fp32 | bf16-mixed | bf16 (default: bf16-mixed on CUDA, fp32 elsewhere). bf16-mixed: "
        "float32 weights and optimizer, bfloat16 generation and autocast forward; bf16: bfloat16 weights too. "
        "On 2 CPU cores with AMX, SmolLM2-135M's generation ran 1.7x faster in bfloat16 and its update 1.0-1.4x "
        "(tracerl/trainers/precision.py)")
    tensorboard: bool = Field(True, description="also log to TensorBoard when it is installed")
    wandb_project: str | None = Field(None, description="also log to this W&B project")
    mlflow_experiment: str | None = Field(None, description="also log to this MLflow experiment")
    trackio_project: str | None = Field(None, description="also log to this Trackio project (local-first: "
                                        "$TRACKIO_DIR, browse it with `trackio show`)")
    code_diff: bool = Field(True, description="keep code.diff in the run folder: the tracked, uncommitted changes "
                            "of the git repository the run started in (capped; never untracked files, never sent "
                            "to a tracker, since it may hold secrets)")
    progress: bool = Field(True, description="show a live progress bar")

    @model_validator(mode="before")
    @classmethod
    def _from_traces_is_rft(cls, data: Any) -> Any:
        # recorded episodes train by RFT (their logprobs are an old policy's): the default there
        if isinstance(data, dict) and data.get("from_traces") is not None:
            algo = data.get("algo")
            if algo is None:
                return {**data, "algo": {"type": "rft"}}
            if isinstance(algo, dict) and "type" not in algo:  # --set algo.min_reward=... alone
                return {**data, "algo": {"type": "rft", **algo}}
        return data

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        if self.data is not None and self.task != "data":
            if "task" in self.model_fields_set:
                raise ValueError(f"task {self.task!r} and data ({self.data.path}) both say what to train on; "
                                 "keep one of them")
            self.__dict__["task"] = "data"  # what the run trains on, as --dry-run and config.json show it
        if self.eval_task is not None and self.data is not None:
            raise ValueError("eval_task evaluates a registered task; with data, hold tasks out with --eval-data "
                             "or --holdout instead")
        if self.from_traces is not None and self.algo.type != "rft":
            raise ValueError("from_traces trains on recorded episodes, which needs algo type rft "
                             "(their logprobs belong to an old policy); pass --algo rft or leave --algo out")
        if self.algo.type == "rft" and self.algo_by_agent:
            raise ValueError("algo rft applies to all agents; remove algo_by_agent")
        if self.group_by == "task" and self.algo_by_agent:
            raise ValueError("group_by=task pools every agent of a task in one group, under one estimator; "
                             "remove algo_by_agent or group by task_agent")
        if self.group_samples == "call" and "rloo" in {a.type for a in (self.algo, *self.algo_by_agent.values())}:
            raise ValueError("group_samples=call makes each call a sample, and RLOO's leave-one-out baseline would "
                             "then keep the rest of the same trajectory; use grpo, or group_samples=trajectory")
        if self.loss.agg == "constant" and self.rollout.max_tokens is None:
            raise ValueError("loss.agg=constant (Dr.GRPO) needs rollout.max_tokens as its constant")
        return self

    def estimator_for(self, agent: str) -> GRPO | DrGRPO | RLOO | Reinforce | ReinforcePP | RFT:
        return self.algo_by_agent.get(agent, self.algo)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
        """Read YAML (or JSON) from ``path``, deep-merge ``overrides`` (CLI flags), validate."""
        data: dict[str, Any] = {}
        if path is not None:
            data = _read_mapping(Path(path))
        return cls.model_validate(_merge(data, overrides or {}))


def _read_mapping(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text()
    try:
        if path.suffix == ".json":
            import json

            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - any parse error becomes one line
        raise ConfigError(f"config file {path}{_parse_error(exc)}; fix the file there") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}")
    return data


def _parse_error(exc: Exception) -> str:
    """", line L, column C: the parser's problem" (1-based, as editors count), on one line."""
    mark = getattr(exc, "problem_mark", None)  # PyYAML's MarkedYAMLError
    if mark is not None:
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        what = f"{problem} ({context})" if context else problem
        return f", line {mark.line + 1}, column {mark.column + 1}: {what}"
    if hasattr(exc, "lineno") and hasattr(exc, "colno"):  # json.JSONDecodeError
        return f", line {exc.lineno}, column {exc.colno}: {exc.msg}"  # type: ignore[attr-defined]
    return " could not be parsed: " + (str(exc).splitlines() or [type(exc).__name__])[0]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "algo":
            out[key] = _merge(out[key], value)
        elif key == "algo" and isinstance(value, dict) and isinstance(out.get(key), dict):
            # a new type replaces the estimator's settings; the same type merges into them
            same = value.get("type", out[key].get("type")) == out[key].get("type")
            out[key] = {**out[key], **value} if same else value
        else:
            out[key] = value
    return out
