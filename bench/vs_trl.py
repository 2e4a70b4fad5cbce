"""tracerl's trainer against TRL's GRPOTrainer on the same job, back to back in one run.

    .venv/bin/python bench/vs_trl.py [--case tool|short] [--steps 100] [--modes trl tracerl tracerl-langgraph] [--rounds 1]
        [--max-tokens 8] [--lr 1e-5] [--seed 0] [--eval-every N] [--threads N] [--model DIR] [--out runs/vs-trl]

The job: GRPO on tracerl's synthetic arithmetic (``tracerl.tasks.synthetic``) from the bundled
tiny model (``--model`` for another Hugging Face folder), 8 prompts x 8 samples a step, at most
``--max-tokens`` new tokens, temperature 1, AdamW lr 1e-5 (betas 0.9/0.99, grad clip 1) constant
without warmup, group-normalised advantages, no KL, ratio clipped to [0.8, 1.28], token-mean loss
over the batch, fp32. This process draws the training tasks (``tasks("train", steps*8, seed)``,
what tracerl.train draws itself) and renders each prompt with the model's chat template as
tracerl's agent sends it (SYSTEM_PROMPT, the question, the calculator tool), then hands TRL the
prompt text and answer as JSON, in order (no shuffling), so both see the same prompts each step.

``--case short`` is the job where the rollout path, not the update, sets the step: the question
as one user turn (no system prompt, no tool), graded by the reply's first integer
(bench/short_agent.py, copied into TRL's reward), one call per episode on the process's shared
OpenAI client.

Contestants, each in its own process, one after the other (``--rounds`` alternates the order):
  trl                GRPOTrainer in its own venv (/work/bench-venvs/trl: torch==2.13.0 first, then
                     trl; made on the first run), a script embedded below that imports no tracerl
  tracerl            tracerl.train with the task's built-in plain HTTP agent, through the gateway
  tracerl-process    tracerl with engine_process: the gateway and engine in a child process
  tracerl-langgraph  the same with examples/math_agent_langgraph.py:solve as the agent

Measured: train wall (model load to the last step), s/step (median interval between step ends),
rollout and update seconds per step (tracerl: time/rollout_s, time/update_s of metrics.jsonl;
TRL: the timed _generate_and_score_completions, the rest of the step), generated tokens per
rollout second and update tokens (prompt + response) per update second. Held-out accuracy is
one function here for every checkpoint of both: greedy ``generate`` on the distinct test tasks
rendered as above, graded by tracerl's reward, before training, every ``--eval-every`` steps
(both save checkpoints then, inside the timed region) and after. Threads: each trainer's own
choice unless ``--threads`` (tracerl takes 1 for a model this small, TRL torch's default, nproc;
on a busy machine two OpenMP threads can be many times slower, so compare with --threads 1 too).
Writes report.md (the table printed), results.json and each contestant's folder under --out.

Not identical (by construction): tracerl's agent executes a calculator tool call and asks again
(up to 2 tool calls, each reply up to max-tokens), TRL cannot parse this chat template's tool
calls and grades the one reply (a tool call scores 0); the eval is single-turn for both.
tracerl multiplies the clipped term by a truncated importance weight against the engine's
logprobs (1 here, same fp32 weights); the std epsilon is 1e-6 (tracerl) vs 1e-4 (TRL).
tracerl's drop_zero_variance is turned off so that both normalise the loss by all tokens.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _key, _value in (("HF_HUB_OFFLINE", "1"), ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
                     ("OPENAI_AGENTS_DISABLE_TRACING", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(_key, _value)

REPO = Path(__file__).resolve().parent.parent
TRL_VENV = Path("/work/bench-venvs/trl")
TORCH_PIN = "torch==2.13.0"  # as everywhere: the CPU build on this machine's index; never another torch
MODES = ("trl", "tracerl", "tracerl-process", "tracerl-langgraph")
AGENTS = {"tracerl": None, "tracerl-process": None,
          "tracerl-langgraph": str(REPO / "examples/math_agent_langgraph.py") + ":solve"}
SHORT_AGENTS = {name: str(REPO / "bench/short_agent.py") + ":solve" for name in ("tracerl", "tracerl-process")}
PROCESS = {"tracerl-process": {"engine_process": True}}  # the gateway and engine in a child process
HPARAMS = {"batch_size": 8, "group_size": 8, "temperature": 1.0, "lr": 1e-5, "eps_low": 0.2,
           "eps_high": 0.28, "betas": [0.9, 0.99], "grad_clip": 1.0}

TRL_SCRIPT = r'''"""TRL's side of bench/vs_trl.py: GRPOTrainer on the job given as JSON; imports no tracerl."""
import json
import re
import sys
import time
from pathlib import Path

import torch
import transformers
import trl
from datasets import Dataset
from transformers import AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

# A copy of tracerl.tasks.synthetic's rule (extract_answer + Arithmetic.is_correct): the text after the
# last "The answer is" on its line, less a final period, is an integer equal to the answer.
# It must stay identical to tracerl.tasks.synthetic.
ANSWER = re.compile(r"the answer is[ \t]*([^\n]*?)[ \t]*\.?[ \t]*$", re.IGNORECASE | re.MULTILINE)
STEPS = []


FIRST_INTEGER = re.compile(r"-?\d+")  # --case short: bench/short_agent.py's first_integer_correct


def reward(completions, answer, **_):
    out = []
    for text, want in zip(completions, answer):
        if CASE == "short":
            found = FIRST_INTEGER.search(text or "")
            out.append(1.0 if found is not None and int(found[0]) == want else 0.0)
            continue
        found = ANSWER.findall(text or "")
        got = found[-1] if found and found[-1] else None
        out.append(1.0 if got is not None and re.fullmatch(r"-?\d+", got) and int(got) == want else 0.0)
    return out


class Timed(GRPOTrainer):
    def _generate_and_score_completions(self, inputs):  # sampling, rewards, advantages: the rollout
        t0 = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        STEPS.append({"rollout_s": time.perf_counter() - t0, "response_tokens": int(out["completion_mask"].sum()),
                      "update_tokens": int(out["prompt_mask"].sum() + out["completion_mask"].sum())})
        return out


class Clock(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        STEPS[-1].update(end=time.perf_counter(), update_s=time.perf_counter() - self.t0 - STEPS[-1]["rollout_s"])

    def on_log(self, args, state, control, logs=None, **kw):
        if logs and "reward" in logs and STEPS:
            STEPS[-1]["reward"] = logs["reward"]


job, out = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
CASE = job.get("case", "tool")
if job["threads"]:
    torch.set_num_threads(job["threads"])
every, b, g = job["ckpt_every"], job["batch_size"], job["group_size"]
config = GRPOConfig(
    output_dir=str(out), max_steps=job["steps"], seed=job["seed"], data_seed=job["seed"],
    # one optimizer step = one generation batch = b prompts x g samples (steps_per_generation =
    # gradient_accumulation_steps = 1, num_iterations = 1: on-policy, ratio against itself)
    per_device_train_batch_size=b * g, gradient_accumulation_steps=1, num_generations=g, num_iterations=1,
    shuffle_dataset=False, max_completion_length=job["max_tokens"], temperature=job["temperature"],
    top_p=1.0, top_k=0, learning_rate=job["lr"], lr_scheduler_type="constant", warmup_steps=0,
    optim="adamw_torch", adam_beta1=job["betas"][0], adam_beta2=job["betas"][1], adam_epsilon=1e-8,
    weight_decay=0.0, max_grad_norm=job["grad_clip"], beta=0.0, epsilon=job["eps_low"],
    epsilon_high=job["eps_high"], loss_type="dapo", scale_rewards="group", mask_truncated_completions=False,
    use_cpu=not torch.cuda.is_available(), bf16=False, gradient_checkpointing=False,  # TRL defaults these on
    model_init_kwargs={"dtype": "float32"}, report_to="none", logging_steps=1, disable_tqdm=True,
    save_strategy="steps" if every else "no", save_steps=every or 1, dataloader_num_workers=0,
)
t0 = time.perf_counter()
trainer = Timed(model=job["model"], reward_funcs=reward, args=config, train_dataset=Dataset.from_list(job["train"]),
                processing_class=AutoTokenizer.from_pretrained(job["model"]), callbacks=[Clock()])
trainer.train()
wall = time.perf_counter() - t0
trainer.save_model(str(out / "final"))
(out / "result.json").write_text(json.dumps({
    "wall_s": wall, "threads": torch.get_num_threads(), "steps": STEPS,
    "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__}}))
'''


def _pip(python: Path, *args: str) -> str:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          check=True, capture_output=True, text=True).stdout


def ensure_trl_venv(venv: Path) -> str:
    """Make ``venv`` with torch==2.13.0 first, then trl (checked by a dry run to pull no other
    torch); reused when trl imports. Returns the trl version."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import trl; print(trl.__version__)"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()
    print(f"making {venv}: {TORCH_PIN}, then trl", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(python, "install", "-q", TORCH_PIN)
    packages = ["trl", "transformers", "datasets", "accelerate"]
    with tempfile.TemporaryDirectory() as tmp:
        pin, report = Path(tmp) / "pin.txt", Path(tmp) / "report.json"
        pin.write_text(TORCH_PIN + "\n")
        _pip(python, "install", "--dry-run", "-q", "--report", str(report), "-c", str(pin), *packages)
        planned = {i["metadata"]["name"].lower(): i["metadata"]["version"]
                   for i in json.loads(report.read_text())["install"]}
        if "torch" in planned:
            raise SystemExit(f"pip would install torch {planned['torch']} into {venv}; not going on")
        _pip(python, "install", "-q", "-c", str(pin), *packages)
    return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()


def build_job(args: argparse.Namespace) -> tuple[dict, list]:
    """The job both contestants get (JSON), and the held-out tasks."""
    from short_agent import short_messages
    from transformers import AutoTokenizer

    from tracerl.tasks.synthetic import CALCULATOR_TOOL, TASKS

    spec, tok = TASKS["arithmetic"], AutoTokenizer.from_pretrained(args.model)

    def render(task) -> str:  # what tracerl's agent sends: the prompt and the tool, or one user turn
        if args.case == "short":
            return tok.apply_chat_template(short_messages(task.data["question"]), tokenize=False,
                                           add_generation_prompt=True)
        return tok.apply_chat_template(spec.messages(task), tools=[CALCULATOR_TOOL], tokenize=False,
                                       add_generation_prompt=True)

    n = args.steps * HPARAMS["batch_size"]
    train = [{"prompt": render(t), "answer": t.answer} for t in spec.tasks("train", n, seed=args.seed)]
    heldout = list({t.data["question"]: t for t in spec.tasks("test", 200, seed=0)}.values())  # distinct ones
    job = {"model": str(args.model), "case": args.case, "seed": args.seed, "steps": args.steps, "max_tokens": args.max_tokens,
           "ckpt_every": args.eval_every, "threads": args.threads, **HPARAMS, "lr": args.lr, "train": train,
           "heldout": [{"prompt": render(t), "answer": t.answer} for t in heldout],
           "tracerl_set": {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.tracerl_set)}}
    return job, heldout


def tracerl_worker(mode: str, job: dict, out: Path) -> None:
    """One tracerl run in this (child) process; writes out/result.json."""
    import torch

    import tracerl

    every = job["ckpt_every"]
    agent = AGENTS[mode] if job.get("case", "tool") == "tool" else SHORT_AGENTS[mode]
    cfg = tracerl.TrainConfig(
        task="arithmetic", agent=agent, model=job["model"], output=out, seed=job["seed"],
        steps=job["steps"], batch_size=job["batch_size"], group_size=job["group_size"],  # its tasks = job["train"]
        algo={"type": "grpo", "scale_rewards": "group"}, drop_zero_variance=False,
        loss={"eps_low": job["eps_low"], "eps_high": job["eps_high"], "agg": "token_mean", "kl_beta": 0.0},
        optim={"lr": job["lr"], "warmup_steps": 0, "schedule": "constant", "betas": tuple(job["betas"]),
               "weight_decay": 0.0, "grad_clip": job["grad_clip"]},
        rollout={"max_tokens": job["max_tokens"], "temperature": job["temperature"], "top_p": 1.0,
                 "timeout_s": 120.0},
        eval_size=0, eval_every=0, save_every=every, keep_checkpoints=job["steps"] // max(every, 1) + 1,
        tensorboard=False, progress=False, threads=job["threads"],
        **{**job.get("tracerl_set", {}), **PROCESS.get(mode, {})},
    )
    t0 = time.perf_counter()
    tracerl.train(cfg)
    wall = time.perf_counter() - t0
    (out / "result.json").write_text(json.dumps({"wall_s": wall, "threads": torch.get_num_threads()}))


def tracerl_steps(out: Path) -> list[dict]:
    """Per-step records of a tracerl run folder (metrics.jsonl), in TRL's script's keys."""
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [{"end": m["time"], "rollout_s": m["time/rollout_s"], "update_s": m["time/update_s"],
             "response_tokens": m["rollout/response_tokens"], "update_tokens": m["update/tokens"],
             "reward": m["rollout/reward_mean"]} for m in lines if "policy/weight_version" in m]


def run_contestant(mode: str, job_path: Path, out: Path, trl_python: Path) -> dict:
    """Run one contestant in its own process; returns its result with per-step records."""
    out.mkdir(parents=True, exist_ok=True)
    if mode == "trl":
        script = out / "trl_grpo.py"
        script.write_text(TRL_SCRIPT)
        cmd = [str(trl_python), str(script), str(job_path), str(out)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, "--job", str(job_path),
               "--out", str(out)]
    t0 = time.perf_counter()
    with open(out / "log.txt", "w") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed (exit {done.returncode}); see {out / 'log.txt'}")
    result = json.loads((out / "result.json").read_text())
    result["process_s"] = time.perf_counter() - t0
    if mode != "trl":
        result["steps"] = tracerl_steps(out)
    return result


def checkpoints(mode: str, out: Path, steps: int) -> list[tuple[int, Path]]:
    if mode == "trl":
        found = [(int(p.name.split("-")[1]), p) for p in out.glob("checkpoint-*")] + [(steps, out / "final")]
    else:
        found = [(int(p.name.split("-")[1]), p) for p in (out / "checkpoints").glob("step-*")]
    return sorted(dict(found).items())


def accuracy(model_dir: Path | str, heldout: list, prompts: list[str], tok, max_tokens: int,
             case: str = "tool") -> float:
    """Greedy single-turn held-out accuracy, graded by tracerl's reward: one function for both."""
    import torch
    from short_agent import first_integer_correct
    from transformers import AutoModelForCausalLM, GenerationConfig

    from tracerl.tasks.synthetic import TASKS

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    model_eos = model.generation_config.eos_token_id  # stop where both trainers' samplers stop
    eos = sorted({tok.eos_token_id, *(model_eos if isinstance(model_eos, list) else [model_eos] if model_eos else [])})
    gen = GenerationConfig(max_new_tokens=max_tokens, do_sample=False, eos_token_id=eos,
                           pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos[0])
    right = 0
    with torch.no_grad():
        for task, prompt in zip(heldout, prompts, strict=True):
            ids = torch.tensor([tok(prompt)["input_ids"]])
            new = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gen)[0, ids.shape[1]:]
            text = tok.decode(new, skip_special_tokens=True)
            right += (first_integer_correct(text, int(task.answer)) if case == "short"
                      else TASKS["arithmetic"].reward(task, text) > 0)
    return right / len(heldout)


def summarize(result: dict) -> dict:
    steps = result["steps"]
    ends = [s["end"] for s in steps]
    gaps = [b - a for a, b in zip(ends, ends[1:])] or [result["wall_s"] / max(len(steps), 1)]
    rewards = [s.get("reward", float("nan")) for s in steps]
    k = min(5, len(rewards))
    return {"wall": result["wall_s"], "process": result["process_s"], "s_step": statistics.median(gaps),
            "rollout": statistics.median(s["rollout_s"] for s in steps),
            "update": statistics.median(s["update_s"] for s in steps),
            # medians of per-step rates: a step slowed by the shared machine does not weigh more
            "gen_tps": statistics.median(s["response_tokens"] / s["rollout_s"] for s in steps),
            "upd_tps": statistics.median(s["update_tokens"] / s["update_s"] for s in steps),
            "reward": f"{statistics.fmean(rewards[:k]):.2f} -> {statistics.fmean(rewards[-k:]):.2f}"}


def machine_facts(trl_version: str, trl_transformers: str) -> dict[str, str]:
    import torch
    import transformers

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    exe = os.path.relpath(sys.executable)
    return {"command": " ".join([sys.executable if exe.startswith("..") else exe, *sys.argv]),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": f"{os.cpu_count()} CPUs (nproc), {cpu}", "python": platform.python_version(),
            "torch": torch.__version__, "trl": trl_version,
            "transformers": f"{transformers.__version__} (tracerl venv), {trl_transformers} (TRL venv)",
            "tracerl commit": commit.stdout.strip() or "unknown"}


def report(facts: dict[str, str], rows: list[tuple[str, int, dict, dict, str]]) -> str:
    lines = ["| | |", "| --- | --- |", *(f"| {k} | `{v}` |" if k == "command" else f"| {k} | {v} |"
                                        for k, v in facts.items()), ""]
    lines += ["| contestant | round | threads | process s | train wall s | s/step | rollout s/step | update s/step | "
              "gen tok/s | update tok/s | train reward (first 5 -> last 5 steps) | held-out accuracy (step: acc) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for mode, rnd, s, result, curve in rows:
        lines.append(f"| {mode} | {rnd} | {result['threads']} | {s['process']:.1f} | {s['wall']:.1f} | {s['s_step']:.2f} | "
                     f"{s['rollout']:.2f} | {s['update']:.2f} | {s['gen_tps']:.0f} | {s['upd_tps']:.0f} | "
                     f"{s['reward']} | {curve} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["trl", "tracerl"])
    parser.add_argument("--rounds", type=int, default=1, help="repeat, alternating the order")
    parser.add_argument("--max-tokens", type=int, default=8, help="max new tokens per reply")
    parser.add_argument("--case", choices=("tool", "short"), default="tool",
                        help="tool: the system prompt and the calculator tool, an update-heavy step; short: "
                        "the question as one user turn, no tool, graded by its first integer, where the "
                        "rollout path sets the step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=HPARAMS["lr"], help="constant learning rate")
    parser.add_argument("--eval-every", type=int, help="checkpoint + evaluate every N steps (default "
                        "steps/4; 0 = before and after only)")
    parser.add_argument("--threads", type=int, help="torch threads of both (default: each its own choice)")
    parser.add_argument("--model", type=Path, help="HF model folder (default: the bundled tiny model)")
    parser.add_argument("--tracerl-set", nargs="*", default=[], metavar="KEY=JSON",
                        help="top-level TrainConfig settings of tracerl's runs, e.g. engine_process=true")
    parser.add_argument("--out", type=Path, default=Path("runs/vs-trl"))
    parser.add_argument("--trl-venv", type=Path, default=TRL_VENV)
    parser.add_argument("--worker", choices=MODES[1:], help=argparse.SUPPRESS)
    parser.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return tracerl_worker(args.worker, json.loads(args.job.read_text()), args.out)
    if args.case == "short" and set(args.modes) - {"trl", *SHORT_AGENTS}:
        parser.error(f"--case short runs {['trl', *SHORT_AGENTS]} (no LangGraph agent for it yet)")
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from tracerl.models import tiny_model_path

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    args.model = (args.model or tiny_model_path()).resolve()
    args.eval_every = max(1, args.steps // 4) if args.eval_every is None else args.eval_every
    t_start = time.perf_counter()
    trl_version = ensure_trl_venv(args.trl_venv)
    job, heldout = build_job(args)
    args.out.mkdir(parents=True, exist_ok=True)
    job_path = (args.out / "job.json").resolve()
    job_path.write_text(json.dumps(job))
    tok, prompts = AutoTokenizer.from_pretrained(args.model), [h["prompt"] for h in job["heldout"]]
    before = accuracy(args.model, heldout, prompts, tok, args.max_tokens, args.case)
    rows = []
    for rnd in range(1, args.rounds + 1):
        for mode in args.modes if rnd % 2 else args.modes[::-1]:
            out = (args.out / f"{mode}-r{rnd}").resolve()
            if out.exists():
                import shutil

                shutil.rmtree(out)
            print(f"round {rnd}: {mode} ...", file=sys.stderr, flush=True)
            result = run_contestant(mode, job_path, out, args.trl_venv / "bin" / "python")
            accs = [(0, before)] + [(step, accuracy(path, heldout, prompts, tok, args.max_tokens, args.case))
                                    for step, path in checkpoints(mode, out, args.steps)]
            curve = " · ".join(f"{step}: {acc:.0%}" for step, acc in accs)
            rows.append((mode, rnd, summarize(result), result, curve))
            print(f"  {mode}: {result['wall_s']:.1f}s, accuracy {curve}", file=sys.stderr, flush=True)
    trl_tf = next((r["versions"]["transformers"] for m, _, _, r, _ in rows if m == "trl"), "not run")
    facts = machine_facts(trl_version, trl_tf)
    facts["case"] = args.case + (f" (tracerl: {' '.join(args.tracerl_set)})" if args.tracerl_set else "")
    facts["held-out"] = f"{len(heldout)} distinct arithmetic test tasks, greedy, single turn"
    facts["bench wall"] = f"{time.perf_counter() - t_start:.0f} s"
    text = report(facts, rows)
    (args.out / "report.md").write_text(text + "\n")
    (args.out / "results.json").write_text(json.dumps(
        {"facts": facts, "runs": [{"mode": m, "round": r, **s, "accuracy": c} for m, r, s, _, c in rows]}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
