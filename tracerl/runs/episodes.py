"""A run's episodes, read from its span store, and what each was in the run.

The trainer names its rollouts ``{run}-s{index}-t{task}-g{sample}`` and its evaluations
``{run}-eval{updates}-t{task}-n{sample}``, so an episode's id says which step, which task of
the step and which sample of its group it was. Steps are numbered as metrics.jsonl numbers
them: the rollouts of index s feed update s + 1 and are logged as step s + 1; an evaluation
after N updates is step N. Episodes from elsewhere (an app's traces imported) have no step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tracerl.core.convert import episode_from_spans
from tracerl.core.spans import SpanRecord
from tracerl.core.store import SpanStore
from tracerl.core.types import Episode

_TRAIN = re.compile(r"-s(\d+)-t(\d+)-g(\d+)$")
_EVAL = re.compile(r"-eval(\d+)-t(\d+)-n(\d+)$")


@dataclass
class Place:
    """Where an episode sits in its run: a training rollout of update ``step`` or an evaluation
    after ``step`` updates; ``task`` indexes the step's tasks, ``sample`` the group."""

    kind: str  # "train" | "eval" | "other"
    step: int | None = None
    task: int | None = None
    sample: int | None = None


def place(episode_id: str) -> Place:
    m = _TRAIN.search(episode_id)
    if m:
        return Place("train", int(m[1]) + 1, int(m[2]), int(m[3]))
    m = _EVAL.search(episode_id)
    if m:
        return Place("eval", int(m[1]), int(m[2]), int(m[3]))
    return Place("other")


def spans_by_episode(store: SpanStore) -> dict[str, list[SpanRecord]]:
    """Every span of the store, by episode (a span without a session follows its trace)."""
    rows = store._query(  # one pass over the table: a run holds thousands of episodes
        "SELECT COALESCE(s.session_id, ts.session_id, 'trace:' || s.trace_id), s.record FROM spans s "
        "LEFT JOIN trace_sessions ts ON ts.trace_id = s.trace_id ORDER BY s.start_ns, s.span_id")
    out: dict[str, list[SpanRecord]] = {}
    for sid, record in rows:
        out.setdefault(sid, []).append(SpanStore._records([(record,)])[0])
    return out


def load_episodes(store: SpanStore) -> list[tuple[Episode, list[SpanRecord]]]:
    """Every episode of the store with its spans, oldest first."""
    return [(episode_from_spans(records, episode_id=sid), records) for sid, records in spans_by_episode(store).items()]


def summary(ep: Episode, diagnosis: Any = None) -> dict[str, Any]:
    """One row of an episode table (JSON-ready)."""
    where = place(ep.id)
    steps = ep.steps
    return {
        "id": ep.id, "kind": where.kind, "step": where.step, "task_index": where.task, "sample": where.sample,
        "task": ep.task.id if ep.task is not None else None, "reward": ep.reward, "is_correct": ep.is_correct,
        "termination": ep.termination_reason.value, "agents": sorted({t.name for t in ep.trajectories}),
        "llm_calls": len(steps), "response_tokens": sum(len(s.response_ids or []) for s in steps),
        "prefix_breaks": sum(t.prefix_breaks for t in ep.trajectories),
        "error": (ep.error or "").strip().splitlines()[0][:200] if ep.error else None,
        "diagnosis": diagnosis,
    }


def by_step(episodes: Iterable[Episode]) -> dict[int, list[Episode]]:
    """The training rollouts of each step."""
    out: dict[int, list[Episode]] = {}
    for ep in episodes:
        where = place(ep.id)
        if where.kind == "train" and where.step is not None:
            out.setdefault(where.step, []).append(ep)
    return out
