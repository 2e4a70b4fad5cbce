"""A run's episodes, read from its span store, and what each was in the run.

The trainer names its rollouts ``{run}-s{index}-t{task}-g{sample}`` and its evaluations
``{run}-eval{updates}-t{task}-n{sample}``, so an episode's id says which step, which task of
the step and which sample of its group it was. Steps are numbered as metrics.jsonl numbers
them: the rollouts of index s feed update s + 1 and are logged as step s + 1; an evaluation
after N updates is step N. Episodes from elsewhere (an app's traces imported) have no step.
"""

from __future__ import annotations

import re
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


def load_episodes(store: SpanStore) -> list[tuple[Episode, list[SpanRecord]]]:
    """Every episode of the store with its spans, oldest first."""
    return [(episode_from_spans(records, episode_id=sid), records) for sid, records in store.spans_by_session().items()]


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
