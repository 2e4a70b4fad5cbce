"""An episode run in one process and assembled in another: what rollout workers do.

A worker (a Ray actor, tracerl.trainers.ray_rollouts) runs the user's rollout function exactly as
rank 0 would, except that its spans go over OTLP only, to the gateway's ``/v1/traces``, which
stores them beside the gateway's own. It then flushes them and reports a :class:`RemoteEpisode`:
how the episode ended, what the agent returned, and how many spans it sent. Rank 0 waits until
that many have reached its store, assembles the episode from the store as in one process, and
grades it there with the run's reward function, so rewards and episodes are the same whichever
process ran the agent.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from . import semconv as sc
from .convert import episode_from_spans
from .grading import Grader, artifacts_of, grade
from .otel import Tracing
from .rollout import RolloutSettings, Session, ended
from .rollout_fn import RolloutFunction, _finish
from .store import SpanStore
from .types import Episode, Task, TerminationReason

log = logging.getLogger(__name__)
_ELSEWHERE = object()  # "a grader will grade this", given to _finish in a worker: it is rank 0's


class SpanCounter(SpanProcessor):
    """Counts the ended spans of each session (its id stamped by SessionSpanProcessor, which
    runs first): what a worker reports as sent."""

    def __init__(self) -> None:
        self._counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        sid = (span.attributes or {}).get(sc.SESSION_ID)
        if sid:
            with self._lock:
                self._counts[str(sid)] += 1

    def pop(self, session_id: str) -> int:
        with self._lock:
            return self._counts.pop(session_id, 0)


@dataclass
class RemoteEpisode:
    """What a worker reports of one episode (plain data: it crosses processes)."""

    episode_id: str
    trace_id: str | None
    span_id: str | None
    spans: int  # of this session, sent over OTLP and flushed
    reason: str | None = None  # a termination reason other than success
    error: str | None = None
    traceback: str | None = None
    artifacts: dict[str, Any] | None = None
    graded: bool = False  # what the agent returned waits for the run's reward function
    episode: dict[str, Any] | None = None  # a whole Episode the agent built itself
    node: str | None = None  # the Ray node that ran it


def run_here(agent: RolloutFunction, task: Task, settings: RolloutSettings, episode_id: str, tracing: Tracing,
             counter: SpanCounter, *, graded: bool, attributes: dict[str, Any] | None = None) -> RemoteEpisode:
    """One episode in this process, its spans over ``tracing``'s OTLP exporter only; ``graded``:
    the run has a reward function (rank 0 grades with it)."""
    sess = Session(episode_id, task, settings=settings, tracing=tracing, attributes=attributes)
    sess.otlp_only = True
    returned, wait, artifacts = None, False, None
    try:
        with sess:
            result = agent.run_body(sess, agent._timeout(settings))
            artifacts = artifacts_of(result)
            returned, wait = _finish(result, sess, _ELSEWHERE if graded else None)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - an agent's error costs its episode, never the worker
        agent._report(episode_id, exc)
    if not tracing.flush():
        log.warning("episode %s: its spans could not all be sent to the gateway", episode_id)
    span = sess._span
    ctx = span.get_span_context() if span is not None else None
    return RemoteEpisode(
        episode_id=episode_id, trace_id=format(ctx.trace_id, "032x") if ctx else None,
        span_id=format(ctx.span_id, "016x") if ctx else None, spans=counter.pop(episode_id),
        reason=sess.termination_reason.value if sess.termination_reason else None, error=sess.error,
        traceback=sess.traceback, artifacts=artifacts, graded=wait,
        episode=returned.model_dump(mode="json") if returned is not None else None)


def _arrived(store: SpanStore, report: RemoteEpisode, wait_s: float) -> list[Any]:
    """The episode's spans once the worker's ``report.spans`` are in ``store`` (the gateway's own
    are not counted: it stored those before it answered), or what is there after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        records = store.spans(session_id=report.episode_id)
        sent = sum(1 for r in records if r.attributes.get(sc.SOURCE) != "gateway")
        if sent >= report.spans or time.monotonic() > deadline:
            if sent < report.spans:
                log.warning("episode %s: %d of the %d spans its worker sent arrived within %.0f s", report.episode_id,
                            sent, report.spans, wait_s)
            return records
        time.sleep(0.02)


def assemble(report: RemoteEpisode, task: Task, settings: RolloutSettings, tracing: Tracing,
             store: SpanStore, grader: Grader | None, *, kind: str, wait_s: float = 30.0) -> Episode:
    """The episode a worker ran, from this process's store, graded here by ``grader``."""
    if report.episode is not None:
        return Episode.model_validate(report.episode)
    episode = episode_from_spans(_arrived(store, report, wait_s), episode_id=report.episode_id, task=task)
    episode.kind = episode.kind or kind
    if report.artifacts is not None and not episode.artifacts:  # too large for the episode span
        episode.artifacts = report.artifacts
    ended(episode, TerminationReason(report.reason) if report.reason else None, report.error, report.traceback)
    if not (report.graded and grader is not None and report.trace_id and report.span_id):
        return episode
    sess = Session(report.episode_id, task, settings=settings, tracing=tracing).resume(report.trace_id, report.span_id)
    return grade(sess, episode, grader)


def lost(task: Task, episode_id: str, why: str, kind: str, tracing: Tracing, settings: RolloutSettings,
         reason: TerminationReason = TerminationReason.ERROR) -> Episode:
    """An episode whose worker died or hung: kept, marked, never trained on. Its episode span is
    recorded here (the worker's never ended), so the store, ``diagnose`` and the dashboard show
    it ended so, beside the LLM calls it made before."""
    with Session(episode_id, task, settings=settings, tracing=tracing, attributes={sc.EPISODE_KIND: kind}) as sess:
        sess.end(reason, why)
    return Episode(id=episode_id, task=task, termination_reason=reason, error=why, kind=kind)
