"""Agents for trainer tests: plain HTTP against the session URL, rewards that always vary."""

from __future__ import annotations

import hashlib
import time

import httpx

import tracerl


def _ask(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    body = {"model": config.model, "messages": [{"role": "user", "content": task.data["question"]}],
            **config.sampling}
    with httpx.Client(base_url=config.base_url, timeout=60) as http:
        reply = http.post("/chat/completions", json=body)
    reply.raise_for_status()
    return reply.json()["choices"][0]["message"]["content"] or ""


@tracerl.rollout
def parity_agent(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    """Reward 1 when the answer's length plus the rollout's seed is even: about half the
    samples whatever the model says, so groups have variance (mechanics tests only)."""
    text = _ask(task, config)
    even = (len(text) + config.sampling.get("seed", 0)) % 2 == 0
    return {"reward": float(even), "is_correct": even}


def _bucket(episode_seed: int | None, task: tracerl.Task) -> int:
    key = f"{task.id}:{episode_seed}".encode()
    return hashlib.sha256(key).digest()[0] % 10


@tracerl.rollout
def flaky_agent(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    """Raises on ~10% of rollouts and hangs past the timeout on another ~10%."""
    bucket = _bucket(config.sampling.get("seed"), task)
    if bucket == 0:
        raise RuntimeError("the agent fell over")
    text = _ask(task, config)
    if bucket == 1:
        time.sleep(5)
    return {"reward": float(len(text) % 2 == 0)}


@tracerl.rollout
def diagnose_agent(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    """For the dashboard and diagnose tests: one rollout in ten raises, one answers with no
    number in it (a format failure under the regex reward), one has a failing tool (an ERROR
    span of the GenAI convention's execute_tool), the rest return the model's reply."""
    from opentelemetry import trace

    bucket = _bucket(config.sampling.get("seed"), task)
    if bucket == 0:
        raise RuntimeError("the agent fell over")
    text = _ask(task, config)
    if bucket == 1:
        return "I would rather not say."
    if bucket == 2:
        tracer = trace.get_tracer("tests.rollout_agents")
        with tracer.start_as_current_span("execute_tool calculator",
                                          attributes={"gen_ai.operation.name": "execute_tool"}) as span:
            span.set_status(trace.Status(trace.StatusCode.ERROR, "ZeroDivisionError: division by zero"))
    return text


@tracerl.rollout
def exiting_agent(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    """parity_agent, except that the first rollout to get here after its LLM call (of the whole
    run: a marker file, $TRACERL_TEST_EXIT_MARKER) ends its process at once, as a crash would."""
    import os

    text = _ask(task, config)
    marker = os.environ.get("TRACERL_TEST_EXIT_MARKER")
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.close(fd)
            os._exit(1)
    even = (len(text) + config.sampling.get("seed", 0)) % 2 == 0
    return {"reward": float(even), "is_correct": even}
