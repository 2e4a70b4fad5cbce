"""Rejection-sampling fine-tuning: keep the trajectories whose reward passes a bar, and
fine-tune on their model tokens with a supervised loss.

Two sources: live rollouts (`--algo rft`) and exported traces of a running app or an earlier
run (`--from-traces traces.db|spans.jsonl`) whose rewards were emitted in production with
``tracerl.emit_reward`` or by a reward function. Per task, ``algo.best_of_group`` (default
on) keeps only the best passing sample of each (task, agent) group; off, every passing one.

From traces (:func:`offline_episodes`), each episode read is counted once, in the first of
these that applies, and the counts are printed and logged as ``from_traces/*`` metrics:

1. **held out**: an evaluation (its spans say ``kind=eval``); an episode whose task id is held
   out (by this run's data, by the run that recorded the traces: its ``heldout.json``, or
   evaluated anywhere in the traces: ``by_id``); one whose first user message has the key of
   a held-out question (``by_key``, :func:`tracerl.tasks.data.question_key`: the text with
   whitespace collapsed, hashed; a data row's question is its ``question`` column after
   ``data.columns``, so a trace and its row get the same key); one whose first user message
   is a held-out question by :mod:`tracerl.tasks.dedup`'s rule (``by_text``: equal once
   normalised, or a held-out question of 8+ words inside it, as an app's template wraps it;
   shorter questions inside a template are not recognised, and questions that differ only in
   punctuation or symbols count as one: the rule errs toward leaving out);
2. **no reward**: no reward span for the episode or its agents. Nothing grades traces here,
   so such an episode is dropped, never trained on as reward 0;
3. **no token ids**: a step recorded without a gateway (an app calling a hosted model, or
   writing another store than the gateway's), or with another tokenizer's ids (its span's
   fingerprint, or ids past the policy's vocabulary). With ``algo.retokenize`` (default true)
   such episodes are re-tokenized with the policy's own chat template, counted and announced
   (:mod:`.retokenize`); with false they are dropped.

An episode without a task id gets one from its first user message: ``Task(id=question key,
data={"question": text})``, so best-of-group selection groups the samples of one question.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError
from tracerl.core.types import Episode, Task, TerminationReason, Trajectory
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


def first_question(ep: Episode) -> str | None:
    """The first user message of ``ep``'s first call that has one: what the app was asked."""
    for step in ep.steps:
        for message in step.input_messages:
            if message.role == "user" and message.content and message.content.strip():
                return message.content
    return None


def drop_held_out(episodes: Sequence[Episode], heldout: set[str], rows: Sequence[Task] = ()
                  ) -> tuple[list[Episode], Counter[str]]:
    """The episodes one may train on, and how many were left out, by reason: ``evaluations``
    (their spans say ``kind=eval``), ``by_id`` (a task in ``heldout`` or evaluated anywhere in
    the traces), ``by_key`` (the first user message has the :func:`~tracerl.tasks.data.task_key`
    of one of ``rows``, the held-out tasks, or the key of an evaluation's first user message),
    ``by_text`` (it is one of those questions by the dedup rule: see the module docstring). An
    accuracy measured on held-out tasks never saw them trained on."""
    from tracerl.tasks.data import question_key
    from tracerl.tasks.dedup import Index, Problem, normalize

    evals = [ep for ep in episodes if ep.kind == "eval"]
    ids = heldout | {ep.task.id for ep in evals if ep.task is not None}
    asked = [q for t in rows if isinstance(q := t.data.get("question"), str) and q.strip()]
    asked += [q for ep in evals if (q := first_question(ep)) is not None]
    keys = {question_key(q) for q in asked}  # a row's is its task_key
    index = Index(Problem("held-out", question_key(q), normalize(q)) for q in asked)
    kept: list[Episode] = []
    left: Counter[str] = Counter()
    for ep in episodes:
        question = first_question(ep)
        if ep.kind == "eval":
            left["evaluations"] += 1
        elif ep.task is not None and ep.task.id in ids:
            left["by_id"] += 1
        elif question is not None and question_key(question) in keys:
            left["by_key"] += 1
        elif question is not None and index.find(normalize(question)):
            left["by_text"] += 1
        else:
            kept.append(ep)
    return kept, left


def key_episodes(episodes: Sequence[Episode]) -> list[Episode]:
    """``episodes``, each one without a task given ``Task(id=question key, data={"question":
    first user message})`` (one without a user message stays without)."""
    from tracerl.tasks.data import question_key

    out: list[Episode] = []
    for ep in episodes:
        question = first_question(ep) if ep.task is None else None
        if question is not None:
            ep = ep.model_copy(update={"task": Task(id=question_key(question), data={"question": question})})
        out.append(ep)
    return out


def has_reward(ep: Episode) -> bool:
    """Whether a final reward was recorded for ``ep`` or one of its agents."""
    return ep.reward is not None or any(t.reward is not None for t in ep.trajectories)


def with_policy_ids(episodes: Sequence[Episode], tokenizer: Any, retokenize_them: bool = True
                    ) -> tuple[list[Episode], Counter[str]]:
    """``episodes`` whose steps all carry the policy's token ids: a step with none
    (``no_token_ids``) or another tokenizer's (``foreign_token_ids``) is re-tokenized with the
    policy's chat template when ``retokenize_them`` (counted as ``retokenized``, of which
    ``retokenized_foreign``, and ``retokenized_steps``), else its episode is dropped (counted
    under its reason)."""
    mine = tokenizer_fingerprint(tokenizer)
    kept: list[Episode] = []
    counts: Counter[str] = Counter()
    for ep in episodes:
        missing = ep.termination_reason is TerminationReason.MISSING_TOKEN_IDS or any(
            not s.has_tokens for s in ep.steps)
        alien = any(foreign(s, tokenizer, mine) for s in ep.steps)
        if not (missing or alien):
            kept.append(ep)
        elif not retokenize_them:
            counts["no_token_ids" if missing else "foreign_token_ids"] += 1
        else:
            ep = retokenize(ep, tokenizer, mine)
            counts["retokenized"] += 1
            counts["retokenized_foreign"] += alien
            counts["retokenized_steps"] += int(ep.metrics.get("convert/retokenized_steps", 0))
            kept.append(ep)
    return kept, counts


@dataclass
class FromTraces:
    """What ``--from-traces`` did with the episodes of one file: each episode read is in
    exactly one of held out, no reward, no token ids, foreign token ids and kept."""

    episodes: int = 0  # read
    evaluations: int = 0
    held_out_by_id: int = 0
    held_out_by_key: int = 0
    held_out_by_text: int = 0
    no_reward: int = 0
    no_token_ids: int = 0  # dropped: algo.retokenize=false
    foreign_token_ids: int = 0  # dropped: algo.retokenize=false
    kept: int = 0
    keyed: int = 0  # read without a task id: given their first user message's key
    unkeyed: int = 0  # read without a task id or a user message: matched to held-out rows by nothing
    unasked_rows: int = 0  # held-out rows without a question: matched to traces by task id only
    retokenized: int = 0  # of the kept
    retokenized_foreign: int = 0  # of those, the ones with another tokenizer's ids
    retokenized_steps: int = 0
    excluded: int = 0  # kept, but ending with a reason ``exclude`` leaves out of the update
    trajectories: int = 0  # that passed the bar, and train

    @property
    def held_out(self) -> int:
        return self.evaluations + self.held_out_by_id + self.held_out_by_key + self.held_out_by_text

    def metrics(self) -> dict[str, float]:
        """The counts as ``from_traces/*`` metrics."""
        return {f"from_traces/{k}": float(v) for k, v in {**asdict(self), "held_out": self.held_out}.items()}

    def lines(self, path: Path, algo: RFT) -> list[str]:
        """What the run prints about the traces it trains on (every count, the zeros too)."""
        where = f"--from-traces {path}"
        flag = str(algo.retokenize).lower()
        out = [f"{where}: {self.episodes} episodes read, {self.kept} kept; left out {self.held_out} of "
               f"{self.episodes} episodes as held out (by task id {self.held_out_by_id}, by question key "
               f"{self.held_out_by_key}, by a held-out question inside the first user message "
               f"{self.held_out_by_text}, evaluations {self.evaluations}); dropped {self.no_reward} without a "
               f"reward (never trained on as reward 0) and {self.no_token_ids + self.foreign_token_ids} without "
               f"the policy's token ids ({self.no_token_ids} recorded without ids, {self.foreign_token_ids} with "
               f"another tokenizer's; algo.retokenize={flag})"]
        if self.keyed or self.unkeyed:
            out.append(f"{where}: {self.keyed} episodes had no task id and were keyed by their first user message "
                       f"(as the data's question column), {self.unkeyed} had neither (nothing can match those "
                       "to held-out rows); give runs a task id with tracerl.set_task(row) after each run, "
                       "or tracerl.session(task=...)")
        if (self.keyed or self.unkeyed) and self.unasked_rows:
            out.append(f"{where}: {self.unasked_rows} held-out rows have no question column, so no episode without "
                       "a task id can be matched to them; name it with --set data.columns.question=COLUMN")
        if self.retokenized:
            out.append(f"{where}: re-tokenized {self.retokenized} of the {self.kept} kept episodes "
                       f"({self.retokenized_steps} steps; {self.retokenized - self.retokenized_foreign} recorded "
                       f"without token ids, {self.retokenized_foreign} with another tokenizer's) with the policy's "
                       "chat template, which may differ from the tokens the model saw; --set algo.retokenize=false "
                       "drops them instead")
        per_task = "the best passing one per task and agent" if algo.best_of_group else "every passing one"
        excluded = (f"; {self.excluded} kept episodes ended with a reason that --exclude leaves out of the update"
                    if self.excluded else "")
        out.append(f"{where}: training on {self.trajectories} trajectories of {self.kept} episodes, {per_task} "
                   f"with reward >= {algo.min_reward} (algo.best_of_group={str(algo.best_of_group).lower()})"
                   f"{excluded}")
        return out


def offline_episodes(path: Path, tokenizer: Any, algo: RFT, heldout: set[str], rows: Sequence[Task] = ()
                     ) -> tuple[list[Episode], FromTraces]:
    """The episodes of ``path`` one may train on, in the order of the module docstring, and
    the counts of what was left out, dropped and re-tokenized (``trajectories`` and
    ``excluded`` are the caller's to fill once it selects)."""
    from tracerl.tasks.data import task_key

    episodes = read_traces(path)
    keyless = [ep for ep in episodes if ep.task is None]
    keyed = sum(first_question(ep) is not None for ep in keyless)
    counts = FromTraces(episodes=len(episodes), keyed=keyed, unkeyed=len(keyless) - keyed,
                        unasked_rows=sum(task_key(t) is None for t in rows))
    episodes, left = drop_held_out(episodes, heldout, rows)
    counts.evaluations, counts.held_out_by_id = left["evaluations"], left["by_id"]
    counts.held_out_by_key, counts.held_out_by_text = left["by_key"], left["by_text"]
    rewarded = [ep for ep in episodes if has_reward(ep)]
    counts.no_reward = len(episodes) - len(rewarded)
    episodes, tokens = with_policy_ids(rewarded, tokenizer, algo.retokenize)
    for name, n in tokens.items():
        setattr(counts, name, n)
    episodes = key_episodes(episodes)
    counts.kept = len(episodes)
    return episodes, counts


def read_traces(path: Path) -> list[Episode]:
    """The episodes of a span store (``.db``) or a spans JSON-lines export, as recorded."""
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
    return episodes


def load_traces(path: Path, tokenizer: Any) -> list[Episode]:
    """Episodes of a span store (``.db``) or a spans JSON-lines export, with token ids for
    every step (retokenized where the trace has none, or another tokenizer's)."""
    return with_policy_ids(read_traces(path), tokenizer)[0]
