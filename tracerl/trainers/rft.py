"""Rejection-sampling fine-tuning: keep the trajectories whose reward passes a bar, and
fine-tune on their model tokens with a supervised loss.

Two sources: live rollouts (`--algo rft`) and exported traces of a running app or an earlier
run (`--from-traces traces.db|spans.jsonl`) whose rewards were emitted in production with
``tracerl.emit_reward`` or by a reward function. Per task, ``algo.best_of_group`` (default
on) keeps only the best passing sample of each (task, agent) group; off, every passing one.
From traces, evaluation episodes and every task held out (by this run, or by the run that
recorded them: its ``heldout.json``) are left out. Steps recorded without a gateway have no
token ids; they are tokenized here with the policy's own chat template and flagged
``retokenized``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError
from tracerl.core.types import Episode, TerminationReason, Trajectory
from tracerl.engines.base import tokenizer_fingerprint

from .batching import Batch, Row, trajectory_reward
from .config import RFT, TrainConfig
from .retokenize import foreign, retokenize


def select(episodes: Sequence[Episode], algo: RFT, exclude: set[str]) -> list[tuple[Episode, Trajectory]]:
    """Trajectories with reward >= ``min_reward``; with ``best_of_group`` only each (task,
    agent) group's best one (ties: the first)."""
    best: dict[tuple[str, str], tuple[float, Episode, Trajectory]] = {}
    kept: list[tuple[Episode, Trajectory]] = []
    for ep in episodes:
        if ep.termination_reason.value in exclude:
            continue
        for traj in ep.trajectories:
            reward = trajectory_reward(ep, traj)
            if reward < algo.min_reward or not traj.sequences:
                continue
            if not algo.best_of_group:
                kept.append((ep, traj))
                continue
            key = (ep.task.id if ep.task else ep.id, traj.name)
            if key not in best or reward > best[key][0]:
                best[key] = (reward, ep, traj)
    return kept + [(ep, traj) for _, ep, traj in best.values()]


def sft_rows(trajectories: Sequence[Trajectory]) -> list[Row]:
    """One row per sequence; the loss covers the model's tokens (mask 1) and nothing else."""
    rows = []
    for traj in trajectories:
        for seq in traj.sequences:
            mask = seq.mask[1:]
            rows.append(Row(input_ids=seq.token_ids[:-1], targets=seq.token_ids[1:], mask=mask,
                            advantages=[float(m) for m in mask], engine_logprobs=None, agent=traj.name))
    return rows


def make_rft_batch(episodes: Sequence[Episode], cfg: TrainConfig) -> Batch:
    assert isinstance(cfg.algo, RFT)
    chosen = select(episodes, cfg.algo, {r.value for r in cfg.exclude})
    batch = Batch(rows=sft_rows([traj for _, traj in chosen]))
    batch.metrics["rft/kept_trajectories"] = float(len(chosen))
    batch.metrics["rft/kept_share"] = len(chosen) / max(1, sum(len(ep.trajectories) for ep in episodes))
    return batch


HELDOUT_FILE = "heldout.json"  # in a run folder: {"task_ids": [...]}, the tasks it holds out


def recorded_heldout(traces: Path) -> set[str]:
    """The held-out task ids of the run that recorded ``traces`` (its folder's heldout.json,
    when the traces are that run's traces.db or sit beside it)."""
    try:
        doc = json.loads((traces.parent / HELDOUT_FILE).read_text())
    except (OSError, ValueError):
        return set()
    ids = doc.get("task_ids") if isinstance(doc, dict) else None
    return {str(i) for i in ids} if isinstance(ids, list) else set()


def drop_held_out(episodes: Sequence[Episode], heldout: set[str]) -> tuple[list[Episode], int]:
    """The episodes one may train on, and how many were left out: evaluations (their spans say
    ``kind=eval``), and any episode of a task in ``heldout`` or evaluated anywhere in the
    traces, so that an accuracy measured on held-out tasks never saw them trained on."""
    evaluated = heldout | {ep.task.id for ep in episodes if ep.kind == "eval" and ep.task is not None}
    kept = [ep for ep in episodes if ep.kind != "eval" and (ep.task is None or ep.task.id not in evaluated)]
    return kept, len(episodes) - len(kept)


def load_traces(path: Path, tokenizer: Any) -> list[Episode]:
    """Episodes of a span store (``.db``) or a spans JSON-lines export, with token ids for
    every step (retokenized where the trace has none)."""
    from tracerl.core.convert import episodes_from_store
    from tracerl.core.store import SpanStore

    if not path.is_file():
        raise ConfigError(f"--from-traces {path}: no such file (a traces.db or a tracerl traces export .jsonl)")
    if path.suffix in (".jsonl", ".json", ".ndjson"):
        with tempfile.TemporaryDirectory() as tmp:
            store = SpanStore(str(Path(tmp) / "import.db"))
            store.import_jsonl(path)
            episodes = episodes_from_store(store)
            store.close()
    else:
        episodes = episodes_from_store(SpanStore(str(path)))
    if not episodes:
        raise ConfigError(f"--from-traces {path}: it holds no episodes")
    mine = tokenizer_fingerprint(tokenizer)
    out = []
    for ep in episodes:
        if ep.termination_reason is TerminationReason.MISSING_TOKEN_IDS or any(
            not s.has_tokens or foreign(s, tokenizer, mine) for s in ep.steps
        ):
            ep = retokenize(ep, tokenizer, mine)
        out.append(ep)
    return out
