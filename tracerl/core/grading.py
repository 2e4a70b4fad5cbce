"""Rewards kept outside the app: the agent returns what it produced, a reward function grades it.

What an agent returns becomes the episode's ``artifacts`` (recorded on the episode span, so
exported traces can be graded again later): a string ``s`` is ``{"answer": s}``, a dict is
taken as it is, an :class:`~tracerl.core.types.Episode` without trajectories gives its own
``artifacts``. A :class:`Grader` then scores them once the episode has ended, as
``fn(task, x)``: ``x`` is a :class:`GradedEpisode`, the assembled episode that also reads as
the mapping of its artifacts, so ``x["answer"]`` and ``x.steps`` both work whatever the
parameter is called. Its float or dict becomes reward spans in the episode's trace, read
back like any reward. Without a grader the agent's own float or dict of numbers is its
reward, as it always was.

A grader that raises, or returns NaN or no number, costs its episode, never the run: the
episode ends with ``grading_error`` and the message (and a ``tracerl.grading`` span says so
in the trace), and the trainer counts it and leaves it out of the update. Many of them are
the reward's bug, not the model's: ``tracerl train`` and ``tracerl eval`` stop on them
(:func:`grading_failure`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Status, StatusCode

from . import semconv as sc
from .errors import GradingError
from .record import emit_reward
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

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Grader:
        """Wrap a reward function (one marked by ``@tracerl.reward`` keeps its name)."""
        if isinstance(fn, Grader):
            return fn
        return cls(fn, getattr(fn, "__tracerl_reward_name__", "reward"))


class GradedEpisode(Episode):
    """What a reward function's second argument is: the ended :class:`Episode` (``x.steps``,
    ``x.trajectories``, ``x.artifacts``) that also reads as the mapping of its artifacts
    (``x["answer"]``, ``x.get("answer")``, ``"answer" in x``, ``dict(x)``).

    A reward's signature cannot say which of the two it wants (``def f(task, x)``), so one
    object serves both."""

    @classmethod
    def of(cls, episode: Episode) -> GradedEpisode:
        return cls.model_construct(_fields_set=set(episode.model_fields_set), **dict(episode.__dict__))

    def __getitem__(self, key: str) -> Any:
        return self.artifacts[key]

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]  # a mapping's keys, as dict(x) reads them
        return iter(self.artifacts)

    def __len__(self) -> int:
        return len(self.artifacts)

    def __contains__(self, key: object) -> bool:
        return key in self.artifacts

    def keys(self) -> KeysView[str]:
        return self.artifacts.keys()

    def values(self) -> ValuesView[Any]:
        return self.artifacts.values()

    def items(self) -> ItemsView[str, Any]:
        return self.artifacts.items()

    def get(self, key: str, default: Any = None) -> Any:
        return self.artifacts.get(key, default)


Mapping.register(GradedEpisode)


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
        raise GradingError(f"the reward function returned {value!r:.80} (a {type(value).__name__}); return a "
                           "float, a bool or a dict of named numbers")
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
    try:
        value = grader.fn(sess.task, GradedEpisode.of(episode))
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


def grading_errors(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes whose reward function failed."""
    return [ep for ep in episodes if ep.termination_reason is TerminationReason.GRADING_ERROR]


def check_grading(episodes: Sequence[Episode], max_share: float, where: str) -> None:
    """Raise a :class:`GradingError` naming the first failure when more than ``max_share`` of
    ``episodes`` are grading errors: a reward that fails that often measures its own bug, and
    training on the episodes it happened to grade would train on a biased few."""
    failed = grading_errors(episodes)
    if not failed or len(failed) <= max_share * len(episodes):
        return
    first = failed[0]
    lines = (first.error or "no message").strip().splitlines()
    raise GradingError(
        f"{where}: {len(failed)} of {len(episodes)} episodes could not be graded (more than "
        f"max_grading_errors={max_share:g} of them); the first, episode {first.id}: {lines[0][:300]}. Fix the "
        "reward function: it is called as fn(task, episode), the episode also reading as its artifacts "
        "(episode['answer'])", episode_id=first.id)


# endings that give a verdict without a reward: the agent (or its grader) broke, so no answer
# of it can be right, whatever would have graded it
_FAILED = frozenset({TerminationReason.ERROR, TerminationReason.TIMEOUT, TerminationReason.CANCELLED,
                     TerminationReason.GRADING_ERROR})


def graded(episode: Episode) -> bool:
    """The episode has a verdict: a reward (or ``is_correct``), or it failed (wrong whatever
    would have graded it). One that ran and has neither was graded by nothing (no reward span,
    no reward function): its accuracy and reward are not measured, never 0."""
    return episode.reward is not None or episode.is_correct is not None or episode.termination_reason in _FAILED


def accuracy_rule(judged: float, reward_max: float) -> str | None:
    """How an accuracy was counted, to print beside it: None when every graded episode's reward
    said ``is_correct``, else the rule that decided the ``judged`` others (reward_max reached)."""
    return f"correct = reward >= {reward_max:g}" if judged else None
