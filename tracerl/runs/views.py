"""What the dashboard and the report show of a run, as JSON-ready dicts.

A :class:`RunView` reads its run folder lazily and again only when a file grew: metrics from
the line it had read up to, episodes when traces.db (or its WAL) changed. So a live run costs
one stat per poll, and a finished one is read once.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracerl.core import semconv as sc
from tracerl.core.spans import SpanRecord
from tracerl.core.types import Episode, Trajectory

from .diagnose import DEFAULT_EXCLUDE, classify, diagnose, rewarded
from .episodes import Place, load_episodes, place, summary
from .folder import Run, open_run, read_metrics

log = logging.getLogger(__name__)


class RunView:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.run: Run = open_run(self.path)  # raises RunError for a folder that is not a run
        self._lock = threading.Lock()
        self._metrics_size = _size(self.path / "metrics.jsonl")
        self._store_stamp: tuple[int, ...] | None = None
        self._episodes: list[tuple[Episode, list[SpanRecord]]] = []
        self._index: dict[str, int] = {}
        self._scores: dict[int, dict[tuple[str, str], tuple[list[float], bool]]] = {}

    @property
    def name(self) -> str:
        return self.path.name

    # -- run and metrics ---------------------------------------------------------------

    def refresh(self) -> Run:
        """The run with any metrics written since the last look."""
        with self._lock:
            size = _size(self.path / "metrics.jsonl")
            if size != self._metrics_size:
                fresh = open_run(self.path)  # status and config too: the run may have ended
                self.run, self._metrics_size = fresh, size
            return self.run

    def info(self) -> dict[str, Any]:
        run = self.refresh()
        return {"name": self.name, "path": str(run.path), "task": run.task, "status": run.status, "error": run.error,
                "steps": run.steps, "steps_done": run.steps_done, "accuracy_before": run.accuracy("before"),
                "accuracy_after": run.accuracy("after"), "accuracy_rule": run.accuracy_rule,
                "reward_before": run.reward("before"), "reward_after": run.reward("after"),
                "ungraded_before": run.ungraded("before"), "ungraded_after": run.ungraded("after"),
                "model": run.config.get("model"),
                "algo": (run.config.get("algo") or {}).get("type"), "updated": run.updated}

    def metrics(self, start: int = 0) -> list[dict[str, Any]]:
        """Metric records from the ``start``-th on (a live page asks for the new ones)."""
        self.refresh()
        return read_metrics(self.path / "metrics.jsonl", start) if start else self.run.metrics

    # -- episodes ----------------------------------------------------------------------

    def episodes(self) -> list[tuple[Episode, list[SpanRecord]]]:
        """Every episode with its spans, read again when the store changed."""
        with self._lock:
            stamp = self._stamp()
            if stamp != self._store_stamp:
                store = self.run.store()
                items = []
                if store is not None:
                    try:
                        items = load_episodes(store)
                    finally:
                        store.close()
                self._episodes, self._store_stamp, self._scores = items, stamp, {}
                self._index = {ep.id: i for i, (ep, _) in enumerate(items)}
            return self._episodes

    def _stamp(self) -> tuple[int, ...]:
        """What changes when the run's episodes do: its file's size and time, or in a store
        shared by runs (no file of its own), how many spans the run has there."""
        if not self.run.config.get("store"):
            return _stamp(self.path / "traces.db")
        store = self.run.store()
        if store is None:
            return (-1,)
        try:
            return (store.count(),)
        finally:
            store.close()

    def episode_rows(self, *, kind: str | None = None, step: int | None = None, task: str | None = None,
                     termination: str | None = None, agent: str | None = None, min_reward: float | None = None,
                     max_reward: float | None = None, cause: str | None = None, q: str | None = None,
                     offset: int = 0, limit: int = 200) -> dict[str, Any]:
        rows = []
        for ep, spans in self.episodes():
            where = place(ep.id)
            reward = ep.reward if ep.reward is not None else 0.0
            if ((kind and where.kind != kind) or (step is not None and where.step != step)
                    or (task and (ep.task is None or task not in ep.task.id)) or (termination and ep.termination_reason.value != termination)
                    or (agent and agent not in {t.name for t in ep.trajectories})
                    or (min_reward is not None and reward < min_reward) or (max_reward is not None and reward > max_reward)
                    or (q and q.lower() not in ep.id.lower() and q.lower() not in _task_text(ep).lower())):
                continue
            found = None if rewarded(ep) else classify(ep, spans)
            if cause and (found is None or found.code != cause):
                continue
            rows.append(summary(ep, None if found is None else found.as_dict()))
        return {"total": len(rows), "rows": rows[offset:offset + limit]}

    def episode(self, episode_id: str) -> dict[str, Any] | None:
        """One episode: its summary, task, conversation per agent, call tree and token sequences
        (each token also as text, when the run's tokenizer loads)."""
        items = self.episodes()
        i = self._index.get(episode_id)
        if i is None:
            return None
        ep, spans = items[i]
        found = None if rewarded(ep) else classify(ep, spans)
        scores = self._step_scores(place(ep.id).step)
        tok = _tokenizer(self.run.config.get("model"))
        return {
            **summary(ep, None if found is None else found.as_dict()),
            "task_data": ep.task.data if ep.task is not None else None,
            "answer": None if ep.task is None else _jsonable(ep.task.answer),
            "rewards": ep.rewards, "traceback": ep.traceback, "artifacts": _jsonable(ep.artifacts),
            "trajectories": [_trajectory(ep, t, scores.get((ep.id, t.name)), tok) for t in ep.trajectories],
            "spans": [_span(s) for s in spans],
        }

    def trainer_logprobs(self, episode_id: str) -> dict[str, Any] | None:
        """The episode's sequences scored by the weights that sampled them (the checkpoint of its
        weight version, or the base model for version 0), next to the sampler's logprobs: where
        they differ is what the importance weights correct (bf16 kernels, stale weights)."""
        items = self.episodes()
        i = self._index.get(episode_id)
        if i is None:
            return None
        ep = items[i][0]
        versions = {s.weight_version for s in ep.steps if s.weight_version is not None}
        version = min(versions) if versions else 0
        folder = self.path / "checkpoints" / f"step-{version:06d}"
        source = str(folder) if version and folder.is_dir() else None
        if version and source is None:
            return {"version": version, "error": f"no checkpoint of weight version {version} is kept "
                    "(keep_checkpoints); the trainer's logprobs cannot be recomputed"}
        temperature = 0.0 if place(ep.id).kind == "eval" else float(
            (self.run.config.get("rollout") or {}).get("temperature", 1.0))
        scored = _score(source or self.run.config.get("model"), [[seq.token_ids for seq in t.sequences]
                                                                  for t in ep.trajectories], temperature)
        return {"version": version, "model": source or "the run's base model", "temperature": temperature,
                "trajectories": scored}

    def groups(self, step: int) -> list[dict[str, Any]]:
        """The (task, agent) groups of a step's rollouts: rewards, solve rate, flat or not."""
        found: dict[tuple[int, str], list[tuple[Episode, float]]] = {}
        exclude = set(self.run.config.get("exclude", DEFAULT_EXCLUDE))
        for ep, where in self._rollouts(step):
            for traj in ep.trajectories or [Trajectory()]:  # a rollout that failed first is reward 0
                reward = traj.reward if traj.reward is not None else ep.reward
                found.setdefault((where.task or 0, traj.name), []).append((ep, float(reward or 0.0)))
        out = []
        for (task_index, agent), members in sorted(found.items()):
            rewards = [r for _, r in members]
            failed = sum(ep.termination_reason.value != "success" for ep, _ in members)
            # flat as the trainer saw it: among the rollouts it kept
            kept: set[float | None] = {r for ep, r in members if ep.termination_reason.value not in exclude} or {None}
            mean = sum(rewards) / len(rewards)
            out.append({
                "task_index": task_index, "agent": agent, "task": members[0][0].task.id if members[0][0].task else None,
                "episodes": [ep.id for ep, _ in members], "n": len(rewards), "reward_mean": mean,
                "reward_std": (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5,
                "reward_min": min(rewards), "reward_max": max(rewards),
                "solve_rate": sum(r > 0 for r in rewards) / len(rewards), "flat": len(kept) == 1,
                "failed": failed,
            })
        return out

    def side_by_side(self, step: int, task_index: int) -> list[dict[str, Any]]:
        """The G rollouts of one task at one step, best first."""
        members = [ep for ep, where in self._rollouts(step) if where.task == task_index]
        members.sort(key=lambda ep: (-(ep.reward or 0.0), ep.id))
        return [{**summary(ep), "conversation": _conversation(ep.trajectories[0]) if ep.trajectories else []}
                for ep in members]

    def _rollouts(self, step: int) -> list[tuple[Episode, Place]]:
        """The training rollouts of ``step``, with where each sat."""
        return [(ep, where) for ep, _spans in self.episodes()
                if (where := place(ep.id)).kind == "train" and where.step == step]

    def diagnosis(self) -> dict[str, Any]:
        return diagnose(self.episodes(), self.refresh().config).as_dict()

    def _step_scores(self, step: int | None) -> dict[tuple[str, str], tuple[list[float], bool]]:
        """The advantages the trainer computed for the step's trajectories (by (episode, agent))."""
        if step is None:
            return {}
        with self._lock:
            if step in self._scores:
                return self._scores[step]
        try:  # the trainer's own function, on the run's own config (needs tracerl[train])
            from tracerl.trainers.batching import score
            from tracerl.trainers.config import TrainConfig

            cfg = TrainConfig.model_validate({k: v for k, v in self.run.config.items() if k != "output"})
            members = [ep for ep, _where in self._rollouts(step)]
            scored, _groups = score(members, cfg)
            out = {(s.episode.id, s.trajectory.name): (s.advantages, s.flat) for s in scored}
        except Exception as exc:  # noqa: BLE001 - tokens are still shown, uncoloured by advantage
            log.info("advantages of step %s not computed: %s", step, exc)
            out = {}
        with self._lock:
            self._scores[step] = out
        return out


def _score(model: str | None, trajectories: list[list[list[int]]], temperature: float) -> list[list[list[float | None]]]:
    """logprob of each token (from the second on) under ``model`` at ``temperature``."""
    import torch

    from tracerl.trainers.losses import token_logprobs

    policy = _policy(model)
    out = []
    for sequences in trajectories:
        rows = []
        for ids in sequences:
            with torch.no_grad():
                logits = policy(input_ids=torch.tensor([ids])).logits.float()
            if temperature > 0:
                lp = token_logprobs(logits[:, :-1], torch.tensor([ids[1:]]), temperature=temperature)[0]
            else:
                lp = token_logprobs(logits[:, :-1], torch.tensor([ids[1:]]))[0]
            rows.append([None, *(float(x) for x in lp)])
        out.append(rows)
    return out


@functools.lru_cache(maxsize=4)
def _tokenizer(model: str | None) -> Any:
    """The run's tokenizer, to show token ids as text (None when it cannot be loaded)."""
    try:
        from transformers import AutoTokenizer

        from tracerl.trainers.model_path import resolve_model

        return AutoTokenizer.from_pretrained(resolve_model(model))
    except Exception as exc:  # noqa: BLE001 - ids are shown instead
        log.warning("no tokenizer for %s (%s): tokens are shown as ids", model, exc)
        return None


@functools.lru_cache(maxsize=1)
def _policy(model: str | None) -> Any:
    from tracerl.engines.torch_engine import load_causal_lm
    from tracerl.trainers.model_path import resolve_model

    return load_causal_lm(resolve_model(model)).eval()


def _trajectory(ep: Episode, traj: Trajectory, scored: tuple[list[float], bool] | None, tok: Any) -> dict[str, Any]:
    advantages, flat = scored if scored is not None else (None, False)
    sequences = []
    for seq in traj.sequences:
        adv: list[float | None] = [None] * len(seq.token_ids)
        if advantages is not None:
            for step_index, (start, end) in zip(seq.step_indices, seq.response_spans):
                if step_index < len(advantages):
                    adv[start:end] = [advantages[step_index]] * (end - start)
        sequences.append({"token_ids": seq.token_ids, "mask": seq.mask, "logprobs": seq.logprobs,
                          "tokens": [tok.decode([i]) for i in seq.token_ids] if tok is not None else None,
                          "advantages": adv if advantages is not None and not flat else None,
                          "steps": seq.step_indices, "start": seq.start, "parent": seq.parent,
                          "parent_agent": seq.parent_agent})
    return {"name": traj.name, "reward": traj.reward, "prefix_breaks": traj.prefix_breaks, "flat": flat,
            "trained": scored is not None and not flat, "sequences": sequences, "conversation": _conversation(traj)}


def _conversation(traj: Trajectory) -> list[dict[str, Any]]:
    """The trajectory as chat messages: the last call's prompt and its reply (an agent that
    keeps its history sends it all), else each call's reply."""
    if not traj.steps:
        return []
    last = traj.steps[-1]
    messages = [m.model_dump(exclude_defaults=True) for m in last.input_messages]
    if last.output_message is not None:
        messages.append({**last.output_message.model_dump(exclude_defaults=True), "sequence": last.sequence})
    return messages


def _span(s: SpanRecord) -> dict[str, Any]:
    a = s.attributes
    kind = a.get(sc.SPAN_TYPE) or a.get("gen_ai.operation.name") or a.get("openinference.span.kind") or ""
    keep = {k: v for k, v in a.items() if k not in (sc.PROMPT_IDS, sc.RESPONSE_IDS, sc.RESPONSE_LOGPROBS)
            and not k.startswith(("gen_ai.input", "gen_ai.output", "llm.input_messages", "llm.output_messages"))}
    return {"span_id": s.span_id, "parent": s.parent_span_id, "trace_id": s.trace_id, "name": s.name,
            "kind": str(kind), "start_ns": s.start_ns, "duration_ms": s.duration_s * 1000, "status": s.status_code,
            "message": s.status_message, "gateway": a.get(sc.SOURCE) == "gateway",
            "attributes": {k: _jsonable(v) for k, v in list(keep.items())[:40]}}


def _task_text(ep: Episode) -> str:
    return "" if ep.task is None else f"{ep.task.id} {ep.task.data}"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _stamp(db: Path) -> tuple[int, ...]:
    out: list[int] = []
    for p in (db, Path(f"{db}-wal")):
        try:
            st = os.stat(p)
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [-1, -1]
    return tuple(out)


def views(paths: Sequence[Path | str]) -> dict[str, RunView]:
    """Views of several runs, named by their folders (a parent added where two share a name)."""
    out: dict[str, RunView] = {}
    for p in paths:
        view = RunView(p)
        name = view.name
        if name in out:
            name = f"{view.path.parent.name}/{view.path.name}"
        out[name] = view
    return out
