"""Running the user's agent: G rollouts per task, concurrently, each one session = one episode.

The agent is any rollout function (``@tracerl.rollout``, sync or async, any framework);
a plain ``fn(task, config)`` is wrapped, and so is an app's own function (``run(question)``),
its inputs mapped from the task (:func:`load_agent`). It never raises here: errors and timeouts come
back as episodes with a termination reason (tracerl.core.rollout).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tracerl.core.errors import ConfigError
from tracerl.core.imports import load_callable
from tracerl.core.otel import Tracing
from tracerl.core.rollout import RolloutSettings
from tracerl.core.rollout_fn import RolloutFunction, rollout
from tracerl.core.semconv import EPISODE_KIND
from tracerl.core.types import Episode, Task, TerminationReason

from .app_function import app_function, takes_task_first


class RemoteRollouts(Protocol):
    """Rollouts that run elsewhere and come back as episodes (Ray workers: .ray_rollouts)."""

    quiet: bool

    def run_many(self, jobs: Sequence[tuple[Task, str, RolloutSettings]], tracing: Tracing, reward: Any,
                 kind: str) -> list[Episode]: ...

    def take_metrics(self) -> dict[str, float]:
        """Since the last call: ``rollout/worker_lost``, episodes lost to workers that died or
        hung; ``rollout/worker_nodes``, how many nodes ran an episode."""
        ...


Agent = RolloutFunction | RemoteRollouts


def load_agent(spec: str) -> RolloutFunction:
    """``package.module:fn`` or ``path/to/file.py:fn`` -> a rollout function.

    What the function is given, by its signature (decided here, once):

    * ``@tracerl.rollout``, or ``fn(task, config)`` (its first parameter named ``task`` or
      annotated ``Task``, a second for the :class:`~tracerl.RolloutContext`): called so.
    * Anything else is the app's own function, ``run(question)`` say, and each parameter is
      given by name: ``task`` the Task, ``config`` the RolloutContext, any other the task's
      column of that name (``task.data[name]``, after ``data.columns`` renamed the file's
      columns); a function of one input named after no column gets the task's question (its
      ``question``, else ``prompt``, else ``input`` column). A parameter with a default keeps it
      when the task lacks the column; a required one the task lacks stops the run before any
      rollout, in one line naming the function, the parameter and the task's columns. Async
      functions alike.

    What it returns is the reply the reward grades, as a rollout function's return: a string
    (``{"answer": text}`` for ``--reward``), a dict of artifacts, or its own float reward.

    Its LLM calls land in the episode when the app builds its client while it runs, from the
    environment or with ``base_url=os.environ["OPENAI_BASE_URL"]`` (``OpenAI()``, ``AsyncOpenAI()``,
    ``Anthropic()``, LiteLLM's ``openai/`` models): during the call ``OPENAI_BASE_URL`` /
    ``ANTHROPIC_BASE_URL`` and their ``*_API_KEY`` name the run's gateway, and each HTTP call
    carries the episode id in W3C baggage, which the gateway files it under. A client built at
    import, before the run's gateway existed, keeps the URL it read then: its calls miss the
    episode (``no_llm_calls``). The model name it sends must be one the gateway serves
    (``tracerl eval --model-name NAME``, ``tracerl train --set rollout.model=NAME``). Its calls are
    not seeded per episode (a seed rides in a session URL), and with several ``--gateway``
    replicas it needs ``config``: the environment names one gateway. See docs/training.md.
    """
    fn = load_callable(spec, "agent")
    if isinstance(fn, RolloutFunction):
        return fn
    if takes_task_first(fn):
        return rollout(fn)
    return rollout(app_function(fn, spec))


def check_agent(agent: Any, tasks: Sequence[Task]) -> None:
    """Preflight: an app function (see :func:`load_agent`) whose inputs ``tasks`` lack raises
    its ConfigError here, before any rollout; anything else passes."""
    check = getattr(getattr(agent, "fn", None), "check_task", None)
    if check is not None:
        for task in tasks:
            check(task)


def task_reward(spec: str | None, options: dict[str, Any], task: Any) -> Any:
    """The reward function of a run: ``spec`` (a built-in grader's name or module:fn) with its
    ``options``, else the task's own default, else None (the agent returns its own reward)."""
    chosen = spec if spec is not None else getattr(task, "default_reward", None)
    if chosen is None:
        if options:
            raise ConfigError(f"reward_options {sorted(options)} are set but no reward function is named; "
                              "pass --reward NAME")
        return None
    from tracerl.tasks.graders import resolve_reward

    return resolve_reward(chosen, **options)


def rollout_seed(seed: int, *parts: int) -> int:
    """A sampling seed that depends only on the run seed and the rollout's position."""
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:6], "big")


def run_rollouts(
    agent: Agent,
    jobs: Sequence[tuple[Task, str, RolloutSettings]],
    *,
    tracing: Tracing,
    concurrency: int,
    reward: Any = None,
    kind: str = "train",
) -> list[Episode]:
    """Run ``(task, episode_id, settings)`` jobs, ``concurrency`` at a time; episodes in job
    order, each graded by ``reward`` when given (see tracerl.core.grading). ``kind`` marks
    their episode spans (``tracerl.episode.kind``): ``eval`` episodes are never trained on.
    An agent that runs elsewhere (:class:`~.ray_rollouts.RayAgent`) runs them itself. With
    gateway ``replicas`` in the settings, job ``i`` is pinned to replica ``i mod n``: a session's
    state lives in the gateway that serves it, so all of an episode's calls go to that one."""
    jobs = [(t, eid, s.model_copy(update={"gateway_url": s.replicas[i % len(s.replicas)]}) if s.replicas else s)
            for i, (t, eid, s) in enumerate(jobs)]
    if not isinstance(agent, RolloutFunction):
        return agent.run_many(jobs, tracing, reward, kind)
    if agent.is_async:
        return asyncio.run(_run_async(agent, jobs, tracing, concurrency, reward, kind))
    pool = concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="tracerl-agent")
    try:
        futures = [pool.submit(_guarded, agent, t, eid, s, tracing, reward, kind) for t, eid, s in jobs]
        episodes = [f.result() for f in futures]
    except BaseException:  # Ctrl-C: drop the queued rollouts now; running ones end on their own, unlogged
        agent.quiet = True
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return episodes


def _guarded(agent: Callable[..., Any], task: Task, episode_id: str, settings: RolloutSettings,
             tracing: Tracing, reward: Any, kind: str) -> Episode:
    try:
        return agent(task, settings, episode_id=episode_id, tracing=tracing, reward=reward,
                     attributes={EPISODE_KIND: kind})
    except Exception as exc:  # noqa: BLE001 - assembling the episode itself failed
        return _failed(task, episode_id, exc, kind)


async def _run_async(agent: RolloutFunction, jobs: Sequence[tuple[Task, str, RolloutSettings]],
                     tracing: Tracing, concurrency: int, reward: Any, kind: str) -> list[Episode]:
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, episode_id: str, settings: RolloutSettings) -> Episode:
        async with gate:
            try:
                return await agent.acall(task, settings, episode_id=episode_id, tracing=tracing, reward=reward,
                                         attributes={EPISODE_KIND: kind})
            except Exception as exc:  # noqa: BLE001
                return _failed(task, episode_id, exc, kind)

    return list(await asyncio.gather(*(one(*job) for job in jobs)))


def _failed(task: Task, episode_id: str, exc: Exception, kind: str) -> Episode:
    return Episode(id=episode_id, task=task, termination_reason=TerminationReason.ERROR,
                   error=f"{type(exc).__name__}: {exc}", kind=kind)
