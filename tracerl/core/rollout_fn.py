"""``@tracerl.rollout``: a user's function as a :class:`RolloutFunction`, whose call is one episode.

The function runs on an open :class:`~tracerl.core.rollout.Session`, within the episode's
timeout; what it returns becomes the episode's artifacts (for the run's reward function) or
its own reward spans; an exception or a timeout becomes its ``termination_reason``. Calling
it always gives an Episode, never an exception: a trainer survives any agent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import functools
import inspect
import logging
import os
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .grading import Grader, artifacts_of, grade, record_artifacts
from .otel import Tracing
from .record import emit_reward
from .rollout import RolloutSettings, Session
from .types import Episode, Task

__all__ = ["RolloutFunction", "rollout"]

log = logging.getLogger(__name__)


_TIMED: concurrent.futures.ThreadPoolExecutor | None = None
_TIMED_LOCK = threading.Lock()


def _timed_pool() -> concurrent.futures.ThreadPoolExecutor:
    """Where sync rollouts with a timeout run, so that the caller can stop waiting. Its threads
    are reused (starting one cost ~0.1 ms of CPU an episode); one that hangs is never killed
    and keeps its thread, so the pool is large: a run would need thousands of hung agents to
    fill it."""
    global _TIMED
    with _TIMED_LOCK:
        if _TIMED is None:
            _TIMED = concurrent.futures.ThreadPoolExecutor(4096, thread_name_prefix="tracerl-rollout")
        return _TIMED


def _forget_pool_after_fork() -> None:
    global _TIMED, _TIMED_LOCK
    _TIMED, _TIMED_LOCK = None, threading.Lock()  # a forked child has none of the parent's threads


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _finish(result: Any, sess: Session, grader: Grader | None) -> tuple[Episode | None, bool]:
    """What the agent returned, while the session is still open: (a whole Episode it built,
    or None; whether ``grader`` grades the episode once it has ended). Its artifacts go on the
    episode span; without a grader (or when it returned a number) it is its own reward."""
    if isinstance(result, Episode) and result.trajectories:
        return result, False  # a whole episode, built by the agent
    artifacts = artifacts_of(result)
    if artifacts is not None:
        record_artifacts(sess, artifacts)
    if grader is not None and artifacts is not None:
        return None, True
    if isinstance(result, Episode):  # artifacts only: its own reward, if it set one
        if result.reward is not None:
            emit_reward(result.reward, is_correct=result.is_correct)
        return None, False
    if isinstance(result, str):
        # every episode of the run has the same cause: say it once, not once per episode
        level = logging.DEBUG if "ungraded-text" in _WARNED else logging.WARNING
        _WARNED.add("ungraded-text")
        log.log(level, "rollout %s returned text but no reward function grades it: pass --reward (a built-in "
                "grader's name or module:function) or return a float (said once per process)", sess.episode_id)
        return None, False
    _emit_result(result, sess)
    return None, False


_WARNED: set[str] = set()  # the once-per-process warnings already given


def _emit_result(result: Any, sess: Session) -> None:
    """Turn the agent's own return value into reward spans: a float, a bool, a dict of numbers."""
    if isinstance(result, bool):
        emit_reward(float(result), is_correct=result)
    elif isinstance(result, (int, float)):
        emit_reward(float(result))
    elif isinstance(result, dict):
        correct = result.get("is_correct")
        for key, value in result.items():
            if key != "is_correct" and isinstance(value, (int, float)) and not isinstance(value, bool):
                emit_reward(float(value), name=str(key), is_correct=correct if key == "reward" else None)
    elif result is not None:
        log.warning("rollout %s returned %s; expected a string, a dict, an Episode, a float or None",
                    sess.episode_id, type(result).__name__)


class RolloutFunction:
    """A user function wrapped by :func:`rollout`; calling it returns an Episode."""

    def __init__(self, fn: Callable[..., Any], timeout_s: float | None = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.timeout_s = timeout_s
        self.is_async = inspect.iscoroutinefunction(fn)
        self._reported: set[str] = set()  # errors logged in full once already
        self.quiet = False  # set when the run was interrupted: rollouts still running end unlogged

    def _report(self, episode_id: str, exc: BaseException) -> None:
        """Log an episode's error, with where it was raised, the first time it is seen; the
        same error again only at debug level (an agent that fails every rollout would flood
        the log). The whole traceback is on the episode and its span."""
        summary = f"{type(exc).__name__}: {exc}"[:300]
        if summary in self._reported or self.quiet:
            log.debug("rollout %s ended with %s", episode_id, summary)
            return
        if len(self._reported) < 1000:
            self._reported.add(summary)
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        log.warning("rollout %s ended with %s%s (the traceback is kept on the episode and its span; the same "
                    "error again is logged at debug level)", episode_id, summary, where)

    def _session(self, task: Any, settings: RolloutSettings | None, episode_id: str | None,
                 tracing: Tracing | None, attributes: Mapping[str, Any] | None) -> Session:
        if not isinstance(task, Task):
            task = Task.model_validate(task) if isinstance(task, dict) and "id" in task else Task(
                id=uuid.uuid4().hex[:12], data=task if isinstance(task, dict) else {"input": task}
            )
        return Session(episode_id, task, settings=settings, tracing=tracing, attributes=attributes)

    def _timeout(self, settings: RolloutSettings | None) -> float | None:
        return settings.timeout_s if settings is not None and settings.timeout_s else self.timeout_s

    def run_body(self, sess: Session, timeout: float | None) -> Any:
        """The user's function on the open session ``sess``, within ``timeout``; an async one
        runs to completion on an event loop of its own (this thread's)."""
        # the episode's clients read for as long as it may run (tracerl.core.clients.http_timeout)
        config = dataclasses.replace(sess.config(), timeout_s=timeout)
        if self.is_async:
            coro = self.fn(sess.task, config)
            return asyncio.run(asyncio.wait_for(coro, timeout) if timeout else coro)
        if timeout is None:
            return self.fn(sess.task, config)
        # Run in a worker (with our OTel context) so we can stop waiting; the worker cannot be
        # killed and finishes in the background.
        ctx = contextvars.copy_context()
        return _timed_pool().submit(ctx.run, self.fn, sess.task, config).result(timeout)

    def __call__(
        self, task: Any, settings: RolloutSettings | None = None, *,
        episode_id: str | None = None, tracing: Tracing | None = None, reward: Any = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Any:
        """Run one episode; returns an Episode (a coroutine of one for an async function).
        ``reward``: a reward function (or :class:`~.grading.Grader`) that grades what the
        agent returned once the episode has ended (see :mod:`tracerl.core.grading`);
        ``attributes``: more attributes for the episode's root span."""
        if self.is_async:
            return self.acall(task, settings, episode_id=episode_id, tracing=tracing, reward=reward,
                              attributes=attributes)
        grader = Grader.of(reward) if reward is not None else None
        sess = self._session(task, settings, episode_id, tracing, attributes)
        returned: Episode | None = None
        graded = False
        try:
            with sess:
                result = self.run_body(sess, self._timeout(settings))
                returned, graded = _finish(result, sess, grader)
        except Exception as exc:  # noqa: BLE001 - the trainer must survive any agent error
            self._report(sess.episode_id, exc)
        episode = returned if returned is not None else sess.episode()
        return grade(sess, episode, grader) if graded and grader is not None else episode

    async def acall(
        self, task: Any, settings: RolloutSettings | None = None, *,
        episode_id: str | None = None, tracing: Tracing | None = None, reward: Any = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Episode:
        grader = Grader.of(reward) if reward is not None else None
        sess = self._session(task, settings, episode_id, tracing, attributes)
        returned: Episode | None = None
        graded = False
        try:
            async with sess:
                timeout = self._timeout(settings)
                coro = self.fn(sess.task, dataclasses.replace(sess.config(), timeout_s=timeout))
                result = await (asyncio.wait_for(coro, timeout) if timeout else coro)
                returned, graded = _finish(result, sess, grader)
        except Exception as exc:  # noqa: BLE001
            self._report(sess.episode_id, exc)
        episode = returned if returned is not None else await asyncio.to_thread(sess.episode)
        if graded and grader is not None:  # a reward function may block (a judge's HTTP call)
            return await asyncio.to_thread(grade, sess, episode, grader)
        return episode


def rollout(fn: Callable[..., Any] | None = None, *, timeout_s: float | None = None) -> Any:
    """Decorate ``fn(task, config)`` so that calling it runs one episode and returns an Episode.

    ``fn`` may be sync or async. It returns what it produced, for a reward function to grade
    (a string, a dict of artifacts, or an ``Episode(artifacts=...)``; see
    :mod:`tracerl.core.grading`), or its own reward: a float or a dict of named rewards
    (``{"reward": 1.0, "is_correct": True, "format": 0.5}``), or None (rewards emitted with
    :func:`emit_reward`). Exceptions and timeouts become a ``termination_reason``.
    """
    if fn is None:
        return lambda f: RolloutFunction(f, timeout_s)
    return RolloutFunction(fn, timeout_s)
