"""Shared by the examples: tasks, the calculator, and a runner that serves the bundled tiny
model through the gateway and prints the episodes an agent produced."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import tracerl  # noqa: E402
from tracerl.tasks.synthetic import CALCULATOR_TOOL, SYSTEM_PROMPT, TASKS, calculator  # noqa: E402

ARITHMETIC = TASKS["arithmetic"]
MULTITURN = TASKS["multiturn"]
TOOLS = [CALCULATOR_TOOL]
MAX_CALLS = 3  # LLM calls per episode: a tool call, its answer, one spare


def problem(task: tracerl.Task) -> Any:
    """The synthetic task a task came from (arithmetic, calculator, ...): its prompt and grading."""
    return TASKS.get(task.dataset or "arithmetic", ARITHMETIC)


__all__ = ["ARITHMETIC", "MAX_CALLS", "MULTITURN", "SYSTEM_PROMPT", "TOOLS", "calculator", "calculator_result",
           "instructions", "problem", "run"]

def instructions(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Split a task's chat prompt into (system text or None, the other messages), for
    frameworks that take the system prompt apart (the Agents SDK's ``instructions``)."""
    if messages and messages[0]["role"] == "system":
        return messages[0]["content"], messages[1:]
    return None, messages


def calculator_result(arguments: str | dict[str, Any]) -> str:
    """Run the calculator on a tool call's arguments; errors are returned to the model as text."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        return calculator(str(args.get("expression", "")))
    except (ValueError, AttributeError, TypeError) as exc:
        return f"error: {exc}"


def run(solve: Callable[..., Any], description: str, dataset: Any = ARITHMETIC) -> list[tracerl.Episode]:
    """``python examples/<agent>.py [--tasks N] [--task NAME] [--model DIR] [--base-url URL]``: run
    and print episodes (``--task calculator --model runs/demo/checkpoints/step-000040``: the demo's
    two-digit problems with the weights ``make demo`` trained)."""
    from rich.console import Console

    from tracerl.cli.render import episode_tree

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tasks", type=int, default=8, help="held-out tasks to run")
    parser.add_argument("--task", choices=sorted(TASKS), default=dataset.name, help="which synthetic task")
    parser.add_argument("--model", help="a Hugging Face model folder (default: the bundled tiny model)")
    parser.add_argument("--base-url", help="an already running gateway (default: start one in-process)")
    parser.add_argument("--db", default="runs/examples.db", help="span store file")
    args = parser.parse_args()
    tasks = TASKS[args.task].tasks("test", args.tasks, seed=0)
    console = Console()
    if args.base_url:
        settings = tracerl.RolloutSettings(gateway_url=args.base_url, store=args.db, temperature=0.0, max_tokens=64)
        episodes = [solve(t, settings) for t in tasks]
    else:
        engine = tracerl.TorchEngine(args.model)  # None: the bundled tiny model
        with tracerl.GatewayServer(engine, args.db) as gw:
            settings = tracerl.RolloutSettings(gateway_url=gw.url, store=args.db, model=engine.model_name,
                                               temperature=0.0, max_tokens=64)
            episodes = [solve(t, settings) for t in tasks]
        engine.shutdown()
    for ep in episodes:
        console.print(episode_tree(ep))
    correct = sum(bool(ep.is_correct) for ep in episodes)
    console.print(f"{len(episodes)} episodes, {sum(len(ep.steps) for ep in episodes)} LLM calls, "
                  f"accuracy {correct}/{len(episodes)}")
    return episodes
