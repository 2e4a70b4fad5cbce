"""Rewards kept outside the app: the agent returns what it produced, a reward function grades it.

What an agent returns becomes the episode's ``artifacts`` (recorded on the episode span, so
exported traces can be graded again later): a string ``s`` is ``{"answer": s}``, a dict is
taken as it is, an :class:`~tracerl.core.types.Episode` without trajectories gives its own
``artifacts``. A :class:`Grader` then scores them once the episode has ended, with
``fn(task, artifacts)`` or, for a function whose second parameter is named ``episode`` (or
annotated :class:`Episode`), ``fn(task, episode)``; its float or dict becomes reward spans in
the episode's trace, read back like any reward. Without a grader the agent's own float or
dict of numbers is its reward, as it always was.

A grader that raises, or returns NaN or no number, costs its episode, never the run: the
episode ends with ``grading_error`` and the message (and a ``tracerl.grading`` span says so
in the trace), and the trainer counts it and leaves it out of the update.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Status, StatusCode

from . import semconv as sc
from .errors import GradingError
from .types import Episode, TerminationReason

if TYPE_CHECKING:
    from .rollout import Session

log = logging.getLogger(__name__)
MAX_ARTIFACTS_CHARS = 1_000_000  # larger artifacts stay on the Episode object, not on its span


@dataclass(frozen=True)
class Grader:
    """A reward function and how to call it: ``name`` keys a float it returns."""

    fn: Callable[..., Any]
    name: str = "reward"
    wants_episode: bool = False

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Grader:
        """Wrap a reward function (one marked by ``@tracerl.reward`` keeps its name)."""
        if isinstance(fn, Grader):
            return fn
        return cls(fn, getattr(fn, "__tracerl_reward_name__", "reward"), wants_episode(fn))


def wants_episode(fn: Callable[..., Any]) -> bool:
    """Whether ``fn``'s second parameter is the episode (named ``episode``, or annotated
    ``Episode``, string annotations included) rather than the artifacts."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    if len(params) < 2:
        return False
    second = params[1]
    note = second.annotation
    if second.name == "episode" or note is Episode:
        return True
    # "Episode", "tracerl.Episode", Episode | None, Optional[Episode] (string annotations too)
    return re.search(r"\bEpisode\b", note if isinstance(note, str) else repr(note)) is not None


def normalize(value: Any, name: str = "reward") -> dict[str, float | bool]:
    """A reward function's return as named rewards (plus ``is_correct``): a float or int is
    ``{name: value}``, a bool also says ``is_correct``, a dict keeps its numbers. NaN,
    infinity, or no number at all is a :class:`GradingError`."""
    if isinstance(value, bool):
        return {name: float(value), "is_correct": value}
    if isinstance(value, (int, float)):
        out: dict[str, float | bool] = {name: float(value)}
    elif isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if key == "is_correct":
                out["is_correct"] = bool(item)
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                out[str(key)] = float(item)
        if not any(k != "is_correct" for k in out):
            raise GradingError(f"the reward function returned {dict(value)!r:.200}, which holds no numeric reward")
    else:
        raise GradingError(f"the reward function returned a {type(value).__name__}; return a float or a dict "
                           "of named numbers")
    bad = [k for k, v in out.items() if not isinstance(v, bool) and not math.isfinite(v)]
    if bad:
        raise GradingError(f"the reward function returned a non-finite {', '.join(bad)} ({out[bad[0]]})")
    return out


def artifacts_of(result: Any) -> dict[str, Any] | None:
    """What a grader reads of an agent's return value; None when it returned a reward (a
    number) or nothing."""
    if isinstance(result, str):
        return {"answer": result}
    if isinstance(result, Mapping):
        return dict(result)
    if isinstance(result, Episode):
        return dict(result.artifacts)
    return None


def record_artifacts(sess: Session, artifacts: dict[str, Any]) -> None:
    """The artifacts on the episode span (while the session is open), for later readers."""
    text = json.dumps(artifacts, default=str, ensure_ascii=False)
    if len(text) > MAX_ARTIFACTS_CHARS:
        log.warning("episode %s: its artifacts are %d characters; they are kept on the Episode, not on its span",
                    sess.episode_id, len(text))
        return
    sess.set_attribute(sc.EPISODE_ARTIFACTS, text)


def grade(sess: Session, episode: Episode, grader: Grader) -> Episode:
    """Score ``episode`` (ended, assembled) with ``grader``; its rewards go into the trace and
    the episode is read back with them. A failing grader marks the episode ``grading_error``."""
    from .rollout import emit_reward

    try:
        value = grader.fn(sess.task, episode if grader.wants_episode else dict(episode.artifacts))
        rewards = normalize(value, grader.name)
    except Exception as exc:  # noqa: BLE001 - a reward function's bug costs its episode, never the run
        message = f"grading failed: {type(exc).__name__}: {exc}"[:2000]
        with sess.reopened() as tracer:
            span = tracer.start_span("tracerl.grading", attributes={
                sc.SPAN_TYPE: "grading", sc.TERMINATION_REASON: TerminationReason.GRADING_ERROR.value,
                sc.EPISODE_ERROR: message})
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, message[:200]))
            span.end()
        log.debug("episode %s: %s", sess.episode_id, message)
        episode.termination_reason, episode.error = TerminationReason.GRADING_ERROR, message
        return episode
    found = rewards.pop("is_correct", None)
    correct = None if found is None else bool(found)
    main = grader.name if grader.name in rewards else next(iter(rewards))  # correctness rides on it
    with sess.reopened():
        for key, reward in rewards.items():
            emit_reward(float(reward), name=key, is_correct=correct if key == main else None)
    return sess.episode()
