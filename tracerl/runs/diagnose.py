"""Why the reward was zero, and why an episode did not train.

Every episode with no positive reward, or left out of the update, gets one cause, from what
the run recorded and never from reading the reply's text:

* infrastructure (the run's machinery failed, not the policy): the agent raised, timed out or
  was cancelled; the grader failed; a call has no token ids (it bypassed the gateway); the
  agent made no LLM call at all;
* no reward: the episode ran and nothing graded it (no reward span, no reward function): not
  a wrong answer, which only a grader can say;
* policy: a tool raised (its span's status is ERROR), the last reply was cut at max_tokens,
  the episode hit max turns, the grader found no answer to compare (``answer_found`` = 0, which
  the built-in graders report), else: the answer was wrong, which is the honest class when a
  grader cannot say more.

Apart from that, why episodes that ran did not count: excluded by termination reason, in a
group whose rewards were all equal (no gradient: dropped), or split by a prefix break into
more than one training sequence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracerl.core.grading import graded
from tracerl.core.semconv import is_tool_span
from tracerl.core.spans import SpanRecord
from tracerl.core.types import Episode, TerminationReason

from .episodes import place

T = TerminationReason

# code -> (label, kind), in the order the table prints them
CAUSES: dict[str, tuple[str, str]] = {
    "agent_error": ("agent exception", "infrastructure"),
    "timeout": ("timeout", "infrastructure"),
    "cancelled": ("cancelled", "infrastructure"),
    "grading_error": ("grading error", "infrastructure"),
    "missing_token_ids": ("missing token ids", "infrastructure"),
    "no_llm_calls": ("no LLM calls", "infrastructure"),
    "no_reward": ("no reward (nothing graded it)", "setup"),
    "tool_error": ("tool error", "policy"),
    "truncated": ("truncated at max tokens", "policy"),
    "max_turns": ("max turns", "policy"),
    "format": ("no answer extracted (format)", "policy"),
    "wrong_answer": ("wrong answer", "policy"),
}
_BY_TERMINATION = {T.ERROR: "agent_error", T.TIMEOUT: "timeout", T.CANCELLED: "cancelled",
                   T.GRADING_ERROR: "grading_error", T.MISSING_TOKEN_IDS: "missing_token_ids",
                   T.NO_LLM_CALLS: "no_llm_calls", T.TRUNCATED: "truncated", T.MAX_TURNS: "max_turns"}
DEFAULT_EXCLUDE = ("error", "timeout", "cancelled", "no_llm_calls", "missing_token_ids", "grading_error")


@dataclass
class Cause:
    code: str
    detail: str | None = None  # the exception, the failed tool, ...

    @property
    def label(self) -> str:
        return CAUSES[self.code][0]

    @property
    def kind(self) -> str:
        return CAUSES[self.code][1]

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "label": self.label, "kind": self.kind, "detail": self.detail}


def rewarded(ep: Episode) -> bool:
    return ep.reward is not None and ep.reward > 0


def classify(ep: Episode, spans: Sequence[SpanRecord] = ()) -> Cause:
    """The cause of an episode's missing reward (call it for those without one, or excluded)."""
    code = _BY_TERMINATION.get(ep.termination_reason)
    if code in ("agent_error", "timeout", "cancelled", "grading_error"):
        return Cause(code, _what(ep.error))
    if code in ("missing_token_ids", "no_llm_calls"):
        return Cause(code)
    if not graded(ep):
        return Cause("no_reward")
    failed = [s for s in spans if s.status_code == "ERROR" and is_tool_span(s.attributes)]
    if failed:
        return Cause("tool_error", f"{failed[0].name}: {_what(failed[0].status_message) or 'failed'}")
    steps = ep.steps
    if code == "truncated" or (steps and steps[-1].finish_reason == "length"):
        return Cause("truncated")
    if code == "max_turns":
        return Cause("max_turns")
    if ep.rewards.get("answer_found") == 0:
        return Cause("format")
    return Cause("wrong_answer")


@dataclass
class Diagnosis:
    """Counts over a run's training episodes (``kind == "train"``; evaluations apart)."""

    episodes: int = 0
    unrewarded: int = 0
    causes: Counter[str] = field(default_factory=Counter)
    by_step: dict[int, Counter[str]] = field(default_factory=dict)
    examples: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)  # code -> (id, detail)
    excluded: Counter[str] = field(default_factory=Counter)  # termination reason -> episodes
    flat_groups: int = 0
    flat_episodes: int = 0
    groups: int = 0
    prefix_break_episodes: int = 0
    eval_episodes: int = 0
    eval_causes: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes, "unrewarded": self.unrewarded,
            "causes": [{"code": c, "label": CAUSES[c][0], "kind": CAUSES[c][1], "episodes": self.causes[c],
                        "examples": [{"id": i, "detail": d} for i, d in self.examples.get(c, [])]}
                       for c in CAUSES if self.causes[c]],
            "by_step": {str(s): dict(c) for s, c in sorted(self.by_step.items())},
            "excluded": dict(self.excluded), "flat_groups": self.flat_groups, "flat_episodes": self.flat_episodes,
            "groups": self.groups, "prefix_break_episodes": self.prefix_break_episodes,
            "eval_episodes": self.eval_episodes, "eval_causes": dict(self.eval_causes),
        }


def diagnose(items: Sequence[tuple[Episode, Sequence[SpanRecord]]], config: dict[str, Any] | None = None,
             examples: int = 3) -> Diagnosis:
    """Classify every unrewarded or excluded episode of a run (see the module docstring)."""
    config = config or {}
    exclude = set(config.get("exclude", DEFAULT_EXCLUDE))
    out = Diagnosis()
    groups: dict[tuple[int | None, int | None, str], list[float]] = {}
    for ep, spans in items:
        where = place(ep.id)
        excluded = ep.termination_reason.value in exclude
        if where.kind == "eval":
            out.eval_episodes += 1
            if not rewarded(ep):
                out.eval_causes[classify(ep, spans).code] += 1
            continue
        out.episodes += 1
        if excluded:
            out.excluded[ep.termination_reason.value] += 1
        elif any(t.prefix_breaks for t in ep.trajectories):
            out.prefix_break_episodes += 1
        if not excluded:
            for traj in ep.trajectories:
                reward = traj.reward if traj.reward is not None else ep.reward
                groups.setdefault((where.step, where.task, traj.name), []).append(float(reward or 0.0))
        if rewarded(ep) and not excluded:
            continue
        out.unrewarded += 1
        cause = classify(ep, spans)
        out.causes[cause.code] += 1
        out.by_step.setdefault(where.step if where.step is not None else -1, Counter())[cause.code] += 1
        kept = out.examples.setdefault(cause.code, [])
        if len(kept) < examples:
            kept.append((ep.id, cause.detail))
    out.groups = len(groups)
    flat = [rewards for key, rewards in groups.items() if key[0] is not None and len(set(rewards)) == 1]
    if config.get("drop_zero_variance", True):
        out.flat_groups, out.flat_episodes = len(flat), sum(len(r) for r in flat)
    return out


def _what(text: str | None) -> str | None:
    lines = (text or "").strip().splitlines()
    return lines[-1][:300] if lines else None  # a traceback's last line says what was raised
