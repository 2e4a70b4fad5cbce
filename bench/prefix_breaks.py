"""How often a multi-turn episode's next prompt does not extend the last prompt + reply, token
for token (a "prefix break": the trainer then starts a new sequence, and the reply's context
is trained as a separate sample).

    python bench/prefix_breaks.py --model smollm2-135m --task multiturn --episodes 128
    python bench/prefix_breaks.py --model qwen2.5-coder-0.5b --data examples/tool_agent/test.jsonl \
        --agent examples/tool_agent/agent.py:solve --reward examples/tool_agent/reward.py:grade \
        --episodes 64 --both        # with and without the gateway continuing a session's tokens

Runs ``tracerl eval`` (the task's agent, or ``--agent`` on ``--data``, sampled at temperature 1,
the model served in-process through the gateway) and counts, over every trajectory with two or
more calls, the call-to-call transitions whose prompt broke the prefix, and why: the reply
re-tokenized differently by the chat template, or a different history. ``--both`` runs it with
the gateway's token continuation (tracerl.gateway.turns) off and on.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tracerl.cli.main import main as tracerl


def transitions(episode: dict) -> tuple[int, int, list[str]]:
    """(transitions, breaks, a reason per break) of one episode's multi-call trajectories."""
    total, breaks, why = 0, 0, []
    for traj in episode["trajectories"]:
        steps = traj["steps"]
        for prev, cur in zip(steps, steps[1:]):
            if prev["prompt_ids"] is None or cur["prompt_ids"] is None:
                continue
            total += 1
            seen = prev["prompt_ids"] + prev["response_ids"]
            if cur["prompt_ids"][: len(seen)] != seen:
                breaks += 1
                same_prompt = cur["prompt_ids"][: len(prev["prompt_ids"])] == prev["prompt_ids"]
                why.append("reply re-tokenized" if same_prompt else "history changed")
    return total, breaks, why


def measure(args: argparse.Namespace, continue_tokens: bool) -> tuple[int, int, int, int, dict[str, int]]:
    """(episodes, multi-call episodes, transitions, breaks, breaks by cause) of one eval run."""
    out = Path(tempfile.mkdtemp(prefix="prefix-breaks-"))
    where = ["--data", args.data, "--agent", args.agent] if args.data else [args.task]
    where += ["--reward", args.reward] if args.reward else []
    code = tracerl(["eval", *where, "--model", args.model, "--max-examples", str(args.episodes),
                    "--temperature", "1", "--max-tokens", str(args.max_tokens), "--timeout", "3600", "--output", str(out),
                    "--continue-tokens" if continue_tokens else "--no-continue-tokens"])
    if code != 0:
        raise SystemExit(code)
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    multi = [e for e in episodes if any(len(t["steps"]) > 1 for t in e["trajectories"])]
    total = breaks = 0
    reasons: dict[str, int] = {}
    for e in multi:
        t, b, why = transitions(e)
        total, breaks = total + t, breaks + b
        for w in why:
            reasons[w] = reasons.get(w, 0) + 1
    return len(episodes), len(multi), total, breaks, reasons


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="multiturn")
    ap.add_argument("--data", help="the user's tasks instead of --task (with --agent)")
    ap.add_argument("--agent")
    ap.add_argument("--reward")
    ap.add_argument("--episodes", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--both", action="store_true", help="token continuation off, then on")
    args = ap.parse_args()
    rows = []
    for on in ((False, True) if args.both else (True,)):
        rows.append((on, *measure(args, on)))
    print("| model | task | token continuation | episodes | multi-call | transitions | prefix breaks | rate |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for on, n, multi, total, breaks, reasons in rows:
        rate = breaks / total if total else 0.0
        task = Path(args.data).name if args.data else args.task
        print(f"| {args.model} | {task} | {'on' if on else 'off'} | {n} | {multi} | {total} | {breaks} | {rate:.1%} |")
        if reasons:
            print("breaks by cause:", ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())))


if __name__ == "__main__":
    run()
