"""``tracerl train TASK`` and ``tracerl eval``: parse flags into the one TrainConfig, run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from tracerl.cli.serve import ContinueTokens, StoreOption
from tracerl.trainers.config import ALGO_NAMES

DataOption = Annotated[str | None, typer.Option(
    "--data", help="your own tasks: JSONL/JSON/CSV/Parquet file, datasets folder, hf:org/name[:config][@split], "
    "or module:fn (instead of TASK)")]
EvalDataOption = Annotated[str | None, typer.Option("--eval-data", help="held-out tasks for --data (same forms)")]
HoldoutOption = Annotated[float | None, typer.Option(
    "--holdout", min=0.0, max=0.99, help="hold out this share of --data's rows (chosen by row hash: stable)")]
RewardOption = Annotated[str | None, typer.Option(
    "--reward", help="grade what the agent returns: exact, numeric, math, regex, contains, json, code, judge, "
    "or module:fn / path/file.py:fn")]
RewardMaxOption = Annotated[float | None, typer.Option(
    "--reward-max", help="the best reward: without is_correct from the reward, an episode is correct when its "
    "reward reaches this (default 1)")]
TaskArgument = Annotated[str | None, typer.Argument(
    help="task name (tracerl tasks list; default arithmetic); leave it out with --data", show_default=False)]
AllowUnsandboxedOption = Annotated[bool, typer.Option(
    "--allow-unsandboxed", help="run code and terminal tasks where bubblewrap does not: the model's programs and "
    "commands then run on this machine as you (TRACERL_ALLOW_UNSANDBOXED=1)")]


def _look_up(task: str | None, agent: str | None, reward: str | None, allow_unsandboxed: bool,
             *more: str | None) -> None:
    """Import ``agent`` first (its module may register the task), then look up ``task`` and
    ``more`` (an eval task): an unknown name is one line here, a dry run included. A code or
    terminal task (or ``--reward code``) where bubblewrap does not run is refused unless
    ``allow_unsandboxed``, which the sandboxes read from the environment."""
    from tracerl import tasks
    from tracerl.tasks.terminal.environment import ALLOW_UNSANDBOXED_ENV, refuse_unsandboxed
    from tracerl.trainers.rollouts import load_agent

    if allow_unsandboxed:
        os.environ[ALLOW_UNSANDBOXED_ENV] = "1"
    if agent:
        load_agent(agent)
    specs = [tasks.get(name) for name in (task, *more) if name is not None and name != "data"]
    for spec in specs:
        if spec.domain in ("code", "terminal"):
            refuse_unsandboxed(f"{spec.name} ({spec.domain} task)")
    if reward == "code":
        refuse_unsandboxed("--reward code")


def _data_overrides(task: str | None, data: str | None, eval_data: str | None, holdout: float | None
                    ) -> dict[str, Any]:
    """The task (or the user's data) the flags name, as settings."""
    from tracerl.core.errors import ConfigError

    if data is None:
        if eval_data is not None or holdout is not None:
            raise ConfigError("--eval-data and --holdout split --data; pass --data FILE too")
        return {} if task is None else {"task": task}
    if task is not None and task != "data":
        raise ConfigError(f"TASK {task!r} and --data {data} both say what to run on; pass one of them")
    found: dict[str, Any] = {"path": data}
    if eval_data is not None:
        found["eval_path"] = eval_data
    if holdout is not None:
        found["holdout"] = holdout
    return {"task": "data", "data": found}


def train(
    task: TaskArgument = None,
    data: DataOption = None,
    eval_data: EvalDataOption = None,
    holdout: HoldoutOption = None,
    reward: RewardOption = None,
    reward_max: RewardMaxOption = None,
    agent: Annotated[str | None, typer.Option(help="rollout function: module:fn or path/file.py:fn")] = None,
    algo: Annotated[str | None, typer.Option(help=" | ".join(ALGO_NAMES) + " (default: grpo)")] = None,
    group_size: Annotated[int | None, typer.Option(help="rollouts per task (G)")] = None,
    batch_size: Annotated[int | None, typer.Option(help="tasks per step")] = None,
    lr: Annotated[float | None, typer.Option(help="peak learning rate")] = None,
    steps: Annotated[int | None, typer.Option(help="training steps")] = None,
    model: Annotated[str | None, typer.Option(help="HF model folder or id (default: bundled tiny model)")] = None,
    from_traces: Annotated[Path | None, typer.Option(
        "--from-traces", help="fine-tune on exported traces (traces.db or .jsonl); the algo is then rft")] = None,
    min_reward: Annotated[float | None, typer.Option(help="rft: keep trajectories with at least this reward")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML (or JSON) file of settings")] = None,
    output: Annotated[Path | None, typer.Option(help="run folder (checkpoints, metrics, traces)")] = None,
    store: StoreOption = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue from the latest checkpoint")] = False,
    seed: Annotated[int | None, typer.Option(help="run seed")] = None,
    eval_size: Annotated[int | None, typer.Option(help="held-out tasks to evaluate on (0 = none)")] = None,
    eval_task: Annotated[str | None, typer.Option(
        "--eval-task", help="evaluate on this task's test split (e.g. train deepscaler, evaluate on aime24)")] = None,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads")] = None,
    engine: Annotated[str | None, typer.Option(
        help="what serves rollouts: torch (default), vllm (colocated, [gpu] extra), openai (--set upstream.url=...)")] = None,
    rollout_workers: Annotated[int | None, typer.Option(
        "--rollout-workers", min=0, help="run the agent in this many Ray worker processes instead of threads "
        "([ray] extra); they reach the gateway over HTTP and send their spans over OTLP")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="with --rollout-workers: a running Ray cluster (HOST:PORT or auto; default: "
        "start one on this machine)")] = None,
    gateway: Annotated[list[str] | None, typer.Option(
        "--gateway", help="a running gateway to serve rollouts (tracerl gateway serve --accept-weights), "
        "repeatable: episodes spread over them and every one gets each step's weights; needs a shared --store")] = None,
    nproc: Annotated[int, typer.Option(
        "--nproc", min=1, help="processes (GPUs) per node the update is sharded over with FSDP2; runs itself "
                               "under torchrun")] = 1,
    nnodes: Annotated[int, typer.Option(
        "--nnodes", min=1, help="nodes (machines) of --nproc processes each: run the same command on every "
                                "node, with the same --rdzv-endpoint")] = 1,
    rdzv_endpoint: Annotated[str | None, typer.Option(
        "--rdzv-endpoint", help="HOST:PORT where the nodes meet (torchrun's c10d rendezvous; one node "
                                "hosts it), with --nnodes > 1")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="any setting as dotted.key=value (value in JSON or plain text), repeatable")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the resolved config and exit")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress bar")] = False,
    allow_unsandboxed: AllowUnsandboxedOption = False,
) -> None:
    """Train TASK's agent with RL on the policy served by tracerl's gateway.

    Before and after training the held-out accuracy is printed; metrics go to OUTPUT/metrics.jsonl
    (and TensorBoard when installed), checkpoints to OUTPUT/checkpoints (HF format).
    """
    from tracerl.trainers.config import TrainConfig

    if (nproc > 1 or nnodes > 1) and "WORLD_SIZE" not in os.environ and not dry_run:
        raise typer.Exit(_torchrun(nproc, nnodes, rdzv_endpoint))
    overrides: dict[str, Any] = _data_overrides(task, data, eval_data, holdout)
    flags = {"reward": reward, "reward_max": reward_max, "agent": agent, "model": model, "from_traces": from_traces, "output": output, "store": store, "seed": seed, "steps": steps,
             "batch_size": batch_size, "group_size": group_size, "eval_size": eval_size, "eval_task": eval_task,
             "threads": threads,
             "engine": engine, "rollout_workers": rollout_workers, "ray_address": ray_address}
    overrides.update({k: v for k, v in flags.items() if v is not None})
    if gateway:
        overrides["gateways"] = gateway
    if resume:
        overrides["resume"] = True
    if quiet:
        overrides["progress"] = False
    if lr is not None:
        overrides["optim"] = {"lr": lr}
    if algo is not None:
        if algo not in ALGO_NAMES:
            from tracerl.core.errors import ConfigError

            raise ConfigError(f"--algo {algo!r}: choose one of {', '.join(ALGO_NAMES)}")
        overrides["algo"] = {"type": algo}
    if min_reward is not None:
        overrides.setdefault("algo", {"type": "rft"})["min_reward"] = min_reward
    for item in set_ or []:
        _set_dotted(overrides, item)
    cfg = TrainConfig.load(config, overrides)
    _look_up(None if cfg.data is not None else cfg.task, cfg.agent, cfg.reward, allow_unsandboxed, cfg.eval_task)
    if dry_run:
        typer.echo(json.dumps(cfg.model_dump(mode="json"), indent=2))
        return
    from tracerl.trainers.loop import TrainingInterrupted
    from tracerl.trainers.loop import train as run_training

    if cfg.resume:
        typer.echo(_resume_line(cfg.output))
    try:
        result = run_training(cfg)
    except TrainingInterrupted as exc:
        typer.echo(_interrupted_line(exc), err=True)
        raise typer.Exit(130) from None
    except KeyboardInterrupt:  # while loading the model, before the first step began
        typer.echo("interrupted before training started; nothing was trained", err=True)
        raise typer.Exit(130) from None
    if os.environ.get("RANK", "0") == "0":  # under torchrun the other ranks only held shards
        from tracerl.trainers.loop import evaluation_skipped

        typer.echo(_summary(result, cfg.eval_size, evaluation_skipped(cfg)))


LAUNCH_OPTIONS = ("--nproc", "--nnodes", "--rdzv-endpoint")  # torchrun's, not the trainer's


def _torchrun(nproc: int, nnodes: int = 1, rdzv_endpoint: str | None = None) -> int:
    """Run this very command under ``torchrun``: ``nproc`` processes on this node, and with
    ``nnodes`` > 1 as one node of several meeting at ``rdzv_endpoint``; its exit status."""
    import subprocess
    import sys

    from tracerl.core.errors import ConfigError

    if nnodes > 1 and not rdzv_endpoint:
        raise ConfigError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT, the address where the nodes "
                          "meet (one of them, reachable from all), given the same on every node")
    args, skip = [], False
    for arg in sys.argv[1:]:
        if skip or arg.startswith(tuple(f"{o}=" for o in LAUNCH_OPTIONS)):
            skip = False
            continue
        if arg in LAUNCH_OPTIONS:
            skip = True
            continue
        args.append(arg)
    env = {**os.environ}
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    # one node: torchrun's own rendezvous on a free port; several: c10d at the endpoint, where
    # ranks are numbered in the order nodes arrive (global rank 0 serves and trains)
    where = (["--standalone"] if nnodes == 1 else
             [f"--nnodes={nnodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}", "--rdzv-id=tracerl"])
    command = [sys.executable, "-m", "torch.distributed.run", *where, f"--nproc-per-node={nproc}",
               "-m", "tracerl", *args]
    return subprocess.run(command, env=env).returncode


def _set_dotted(out: dict[str, Any], item: str) -> None:
    from tracerl.core.errors import ConfigError

    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {item!r}: write it as dotted.key=value, e.g. --set loss.kl_beta=0.01")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    *parents, leaf = key.strip().split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {item!r}: {part} is not a group of settings")
    node[leaf] = value


def _checkpoint_step(path: Path) -> int:
    return int(path.name.rpartition("-")[2])  # step-000012, as checkpoint.save names it


def _resume_line(output: Path) -> str:
    from tracerl.trainers import checkpoint

    found = checkpoint.latest(output / "checkpoints")
    if found is None:
        return f"--resume: no checkpoint in {output / 'checkpoints'}, starting from step 0"
    return f"resuming from step {_checkpoint_step(found)} ({found})"


def _interrupted_line(exc: Any) -> str:
    line = f"interrupted at step {exc.step}"
    if exc.checkpoint is None:
        return f"{line}; no checkpoint was saved yet, so --resume (or a fresh run) starts from step 0"
    saved = _checkpoint_step(exc.checkpoint)
    again = "" if saved == exc.step else f"; steps after {saved} run again"
    return f"{line}; checkpoint {exc.checkpoint} saved; continue with --resume{again}"


def _summary(result: Any, eval_size: int, skipped: str | None = None) -> str:
    def pct(x: float | None, reward: float | None, ungraded: tuple[int, int] | None = None) -> str:
        if x is None:
            return "not measured (no episode had a reward)" if ungraded else "n/a"
        part = f" of {ungraded[1] - ungraded[0]} graded episodes ({ungraded[0]} without a reward)" if ungraded else ""
        return f"{x:.1%}{part}" + ("" if reward is None else f"  (mean reward {reward:.3f})")

    if not eval_size:
        lines = ["accuracy: not measured (--eval-size 0)"]
    elif skipped is not None:  # the run evaluated nothing, and says why
        lines = [f"accuracy: {skipped}"]
    else:
        before = pct(result.accuracy_before, result.reward_before, result.ungraded.get("before"))
        if result.start_step:  # measured before step 1, by the run this one continues
            before = ("not in metrics.jsonl" if result.accuracy_before is None else before) + \
                f" (measured by the run resumed at step {result.start_step})"
        lines = [f"accuracy before: {before}", f"accuracy after:  {pct(result.accuracy_after, result.reward_after, result.ungraded.get('after'))}"]
        if result.accuracy_rule:
            lines.append(f"accuracy counts an episode correct when {result.accuracy_rule.removeprefix('correct = ')}: "
                         "the reward gave no is_correct (return {\"reward\": ..., \"is_correct\": ...}, or set "
                         "--reward-max)")
    if result.final_checkpoint is not None:
        lines.append(f"checkpoint: {result.final_checkpoint}")
    lines.append(f"metrics: {result.run_dir / 'metrics.jsonl'}")
    return "\n".join(lines)


def evaluate(
    task: TaskArgument = None,
    data: DataOption = None,
    eval_data: EvalDataOption = None,
    holdout: HoldoutOption = None,
    reward: RewardOption = None,
    reward_max: RewardMaxOption = None,
    max_grading_errors: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="exit 1 when more than this share of episodes could not be graded")] = 0.1,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="data.* or reward_options.* setting as dotted.key=value, repeatable")] = None,
    model: Annotated[str | None, typer.Option(help="HF model folder or id served in-process (default: tiny)")] = None,
    base_url: Annotated[str | None, typer.Option(help="evaluate a running OpenAI-compatible server instead")] = None,
    litellm_model: Annotated[str | None, typer.Option(
        help="evaluate a hosted model through LiteLLM (provider/model, keys from the provider's env vars; "
        "--base-url becomes its API base)")] = None,
    session_path: Annotated[bool, typer.Option(
        help="send the episode id in the URL path (tracerl gateways); --no-session-path for others")] = True,
    model_name: Annotated[str, typer.Option(help="model name sent in requests")] = "tracerl-tiny",
    api_key_env: Annotated[str | None, typer.Option(help="environment variable holding the API key")] = None,
    agent: Annotated[str | None, typer.Option(help="rollout function: module:fn or path/file.py:fn")] = None,
    n: Annotated[int, typer.Option(min=1, help="samples per task")] = 1,
    pass_k: Annotated[list[int] | None, typer.Option("--pass-k", min=1, help="report pass@k (repeatable)")] = None,
    concurrency: Annotated[int, typer.Option(min=1)] = 32,
    max_examples: Annotated[int, typer.Option(min=1, help="first N tasks of the split")] = 64,
    split: Annotated[str, typer.Option(help="split to evaluate")] = "test",
    temperature: Annotated[float | None, typer.Option(min=0, help="default: 0 for n=1, else 1")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="response cap per call")] = 96,
    seed: Annotated[int, typer.Option(help="sampling seeds derive from it")] = 0,
    output: Annotated[Path, typer.Option(help="folder for episodes.jsonl, report.json, traces.db")] = Path("runs/eval"),
    store: StoreOption = None,
    continue_tokens: ContinueTokens = True,
    timeout: Annotated[float | None, typer.Option(
        min=1, help="seconds an episode may take, waiting for the model included (default: the app's own "
        "@tracerl.rollout(timeout_s=...), else 300): raise it for a large model on a CPU, where --concurrency "
        "episodes share one engine", show_default=False)] = None,
    allow_unsandboxed: AllowUnsandboxedOption = False,
) -> None:
    """Evaluate an agent on TASK: accuracy and pass@k with 95% intervals, termination reasons."""
    import os

    from tracerl.core.errors import ConfigError
    from tracerl.core.rollout import RolloutSettings

    if pass_k and max(pass_k) > n:
        raise ConfigError(f"--pass-k {max(pass_k)} needs at least that many samples: pass --n {max(pass_k)}")
    key = "tracerl"
    if api_key_env:
        key = os.environ.get(api_key_env) or ""
        if not key:
            raise ConfigError(f"--api-key-env {api_key_env}: that environment variable is empty or unset")
    settings = RolloutSettings(
        gateway_url=base_url or "http://127.0.0.1:0", model=model_name, api_key=key,
        temperature=temperature if temperature is not None else (0.0 if n == 1 else 1.0),
        max_tokens=max_tokens, session_path=session_path, timeout_s=timeout,
    )
    from tracerl.trainers.evaluate import run_eval_command

    if litellm_model and model:
        raise ConfigError("--model serves a local model, --litellm-model a hosted one: pass one of them")
    extra: dict[str, Any] = _data_overrides(task, data, eval_data, holdout)
    task = extra.pop("task", "arithmetic")
    for item in set_ or []:
        if not item.startswith(("data.", "reward_options.")):
            raise ConfigError(f"--set {item!r}: tracerl eval takes data.* and reward_options.* settings; "
                              "the rest are its own flags (tracerl eval --help)")
        _set_dotted(extra, item)
    data_cfg = None
    if "data" in extra:
        from tracerl.tasks.data import DataConfig

        data_cfg = DataConfig.model_validate(extra["data"])
    _look_up(None if data_cfg is not None else task, agent, reward, allow_unsandboxed)
    report = run_eval_command(task, settings, agent=agent, model=model, external=base_url is not None, n=n,
                              ks=pass_k or [], concurrency=concurrency, max_examples=max_examples, split=split,
                              seed=seed, output=output, litellm_model=litellm_model, data=data_cfg,
                              reward=reward, reward_options=extra.get("reward_options"),
                              reward_max=1.0 if reward_max is None else reward_max, continue_tokens=continue_tokens,
                              store=store)
    _print_report(task, report, output)
    _fail_if_all_failed(task, report, output, agent)
    from tracerl.core.grading import check_grading

    check_grading(report.episodes, max_grading_errors, f"tracerl eval {task}")


def _fail_if_all_failed(task: str, report: Any, output: Path, agent: str | None) -> None:
    """Every episode failing measures the agent's harness, not the model: exit 1, not 0."""
    from tracerl.core.errors import RolloutError
    from tracerl.trainers.evaluate import failed_episodes

    failed = failed_episodes(report.episodes)
    if not report.episodes or len(failed) < len(report.episodes):
        return
    first = failed[0]
    error = (first.error or "").strip().splitlines()
    what = f"{first.termination_reason.value}: {error[0][:300] if error else 'no message'}"
    if agent is None:
        from tracerl import tasks

        agent = tasks.get(task).default_agent
    raise RolloutError(f"all {len(failed)} episodes of {task} failed, the first with {what}; check the agent "
                       f"{agent}: each episode's error and traceback are in {output / 'episodes.jsonl'}",
                       episode_id=first.id)


def _print_report(task: str, report: Any, output: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("metric", "value", "95% interval", title=f"{task}: {len(report.episodes)} episodes")
    rule = report.accuracy_rule
    if report.accuracy is None or report.reward_mean is None:  # nothing graded: no number to show
        table.add_row("accuracy", "not measured", "")
        table.add_row("reward mean", "no reward", "")
    else:
        of = f" of {report.graded_count} graded" if report.ungraded else ""
        table.add_row((f"accuracy ({rule})" if rule else "accuracy") + of, f"{report.accuracy:.1%}",
                      f"± {report.accuracy_ci:.1%}")
        for k, (value, ci) in sorted(report.pass_at.items()):
            table.add_row(f"pass@{k}{of}", f"{value:.1%}", f"± {ci:.1%}")
        table.add_row(f"reward mean{of}", f"{report.reward_mean:.3f}", "")
    if report.tool_use is not None:  # tools were offered: how many episodes called one
        table.add_row("episodes calling a tool", f"{report.tool_use:.1%}", "")
    reasons = Table("termination reason", "episodes")
    for reason, count in sorted(report.reasons.items(), key=lambda x: -x[1]):
        reasons.add_row(reason, str(count))
    console = Console()
    console.print(table)
    if report.accuracy is None:
        console.print(f"accuracy {report.not_measured()}", soft_wrap=True)
    elif report.ungraded:
        console.print(f"{report.ungraded} of {len(report.episodes)} episodes have no reward (nothing graded them): "
                      "accuracy and reward are over the other ones", soft_wrap=True)
    if rule:
        console.print(f"{report.judged_by_reward_max} of {len(report.episodes)} episodes had no is_correct from the "
                      f"reward, so they count as correct when their reward reaches {report.reward_max:g} "
                      "(--reward-max); a reward returning {\"reward\": ..., \"is_correct\": ...} says it itself")
    console.print(reasons)
    console.print(f"episodes: {output / 'episodes.jsonl'}")
