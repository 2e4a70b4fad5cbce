"""Spans of one episode -> Episode(Trajectories(Steps)).

1. Deduplicate, build the span tree; an orphan (its parent never arrived) is re-attached to
   the innermost span of its trace whose time interval contains its start.
2. Find LLM-call spans in any dialect (see :mod:`.semconv`). Nested framework LLM spans
   (a LangChain run wrapping an OpenAI-SDK span) describe one call and are folded together.
3. Join each gateway span (token truth) to the framework span of the same call: W3C
   parent/child first, ``gen_ai.response.id`` second, order in the session last.
4. Order steps by the gateway's sequence number, split them into trajectories by agent
   name, build token-level sequences (:mod:`.sequences`).
5. Attach reward spans to the step they follow (``scope=step``) or to the episode.

Nothing here raises on odd data: missing token ids, missing parents and unjoinable spans end
up as metrics and a termination reason (ARCHITECTURE: nothing crashes the trainer).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from . import _json
from . import semconv as sc
from .sequences import build_sequences, call_order, link_callers
from .spans import SpanRecord, to_records
from .store import TRACE_SESSION_PREFIX
from .types import Episode, Step, Task, TerminationReason, Trajectory, construct

DEFAULT_AGENT = "main"
_Key = tuple[str, str]  # (trace_id, span_id)


class _Tree:
    """Parent links with orphans re-attached, and memoised agent lookups."""

    def __init__(self, spans: list[SpanRecord]):
        self.by_key: dict[_Key, SpanRecord] = {}
        for s in spans:
            self.by_key.setdefault((s.trace_id, s.span_id), s)
        self.spans = list(self.by_key.values())
        self.parent: dict[_Key, _Key | None] = {}
        orphans: list[SpanRecord] = []
        for s in self.spans:
            parent = (s.trace_id, s.parent_span_id) if s.parent_span_id else None
            if parent is not None and parent not in self.by_key:
                orphans.append(s)
                parent = None
            self.parent[(s.trace_id, s.span_id)] = parent
        self.orphans = len(orphans)
        if orphans:
            by_trace: dict[str, list[SpanRecord]] = {}
            for t in self.spans:
                by_trace.setdefault(t.trace_id, []).append(t)
            for s in orphans:
                self.parent[(s.trace_id, s.span_id)] = self._container(s, by_trace[s.trace_id])
        self._agent: dict[_Key, str | None] = {}

    def _container(self, s: SpanRecord, candidates: list[SpanRecord]) -> _Key | None:
        """The innermost (latest-starting) span whose interval holds s's start, never one
        of s's own descendants."""
        best: SpanRecord | None = None
        for c in candidates:
            if c is s or not (c.start_ns <= s.start_ns <= c.end_ns):
                continue
            if best is not None and c.start_ns < best.start_ns:
                continue
            if any(a is s for a in self.ancestors(c)):
                continue
            best = c
        return (best.trace_id, best.span_id) if best is not None else None

    def ancestors(self, s: SpanRecord) -> Iterable[SpanRecord]:
        key = self.parent.get((s.trace_id, s.span_id))
        depth = 0
        while key is not None and depth < 10_000:  # depth bound guards a cyclic input
            yield self.by_key[key]
            key = self.parent.get(key)
            depth += 1

    def agent(self, s: SpanRecord) -> str | None:
        """Nearest enclosing agent name (the span itself included)."""
        key = (s.trace_id, s.span_id)
        if key in self._agent:
            return self._agent[key]
        name = sc.agent_name_of(s)
        if name is None:
            parent = self.parent.get(key)
            name = self.agent(self.by_key[parent]) if parent is not None else None
        self._agent[key] = name
        return name


def _fold_framework_calls(tree: _Tree, calls: list[sc.LLMCall]) -> dict[_Key, sc.LLMCall]:
    """One entry per real call: nested framework LLM spans (a LangChain run around an OpenAI-SDK
    span) fold into the outermost, and so do sibling spans of two instrumentors that name the
    same response id (OpenInference LangChain does not parent OpenLLMetry's span)."""
    keys = {(c.span.trace_id, c.span.span_id): c for c in calls}
    outer: dict[_Key, sc.LLMCall] = {}
    for c in calls:
        top = c
        for anc in tree.ancestors(c.span):
            found = keys.get((anc.trace_id, anc.span_id))
            if found is not None:
                top = found
        if top is not c:
            _fill(top, c)
        outer[(top.span.trace_id, top.span.span_id)] = top
    by_rid: dict[str, sc.LLMCall] = {}
    by_content: dict[tuple[Any, ...], sc.LLMCall] = {}
    for key, c in sorted(outer.items(), key=lambda kv: kv[1].span.start_ns):
        if c.response_id:
            first = by_rid.setdefault(c.response_id, c)
        else:
            # Without a response id (OpenInference LiteLLM's acompletion): two spans whose
            # times overlap and that record the same conversation and answer are one call.
            content = _content_key(c)
            first = c
            if content is not None:
                first = by_content.setdefault(content, c)
                if first is not c and first.span.end_ns < c.span.start_ns:
                    by_content[content] = first = c
        if first is not c:
            _fill(first, c)
            del outer[key]
    return outer


def _content_key(c: sc.LLMCall) -> tuple[Any, ...] | None:
    out = c.output_message
    if out is None or not c.input_messages:
        return None
    last = c.input_messages[-1]
    return (len(c.input_messages), last.role, last.content, out.content, tuple(t.name for t in out.tool_calls))


def _fill(dst: sc.LLMCall, src: sc.LLMCall) -> None:
    """Copy what dst lacks from src (the inner span of the same call often knows more)."""
    for name in ("output_message", "model", "response_id", "finish_reason", "input_tokens",
                 "output_tokens", "agent", "node", "node_step"):
        if getattr(dst, name) is None and getattr(src, name) is not None:
            setattr(dst, name, getattr(src, name))
    if not dst.input_messages:
        dst.input_messages = src.input_messages
    if not dst.tools:
        dst.tools = src.tools


def _same_call(f: sc.LLMCall, g: sc.LLMCall) -> bool:
    """Order-join sanity check: refuse a pair whose recorded outputs disagree."""
    fo, go = f.output_message, g.output_message
    if fo is None or go is None or fo.content is None or go.content is None:
        return True
    return fo.content.strip() == go.content.strip()


def _join(
    tree: _Tree, gateway: list[sc.LLMCall], framework: dict[_Key, sc.LLMCall], metrics: Counter[str]
) -> list[tuple[sc.LLMCall | None, sc.LLMCall | None]]:
    """Pair gateway calls with framework calls: parent/child, then response id, then order."""
    if not framework:  # gateway spans only (no framework instrumentation): nothing to join
        return [(g, None) for g in gateway]
    pairs: dict[int, sc.LLMCall] = {}  # id(gateway call) -> framework call
    used: set[_Key] = set()
    for g in gateway:
        for anc in tree.ancestors(g.span):
            key = (anc.trace_id, anc.span_id)
            if key in framework and key not in used:
                pairs[id(g)] = framework[key]
                used.add(key)
                metrics["convert/joined_by_parent"] += 1
                break
    by_rid = {f.response_id: k for k, f in framework.items() if f.response_id and k not in used}
    for g in gateway:
        if id(g) in pairs or not g.response_id:
            continue
        found = by_rid.pop(g.response_id, None)
        if found is not None and found not in used:
            key = found
            pairs[id(g)] = framework[key]
            used.add(key)
            metrics["convert/joined_by_response_id"] += 1
    rest_g = [g for g in gateway if id(g) not in pairs]
    rest_f = sorted((f for k, f in framework.items() if k not in used), key=lambda f: f.span.start_ns)
    for g, f in zip(rest_g, rest_f, strict=False):
        if _same_call(f, g):
            pairs[id(g)] = f
            used.add((f.span.trace_id, f.span.span_id))
            metrics["convert/joined_by_order"] += 1
    out: list[tuple[sc.LLMCall | None, sc.LLMCall | None]] = [(g, pairs.get(id(g))) for g in gateway]
    unjoined = [f for k, f in framework.items() if k not in used]
    if gateway and unjoined:
        metrics["convert/unjoined_framework_calls"] += len(unjoined)
    out.extend((None, f) for f in unjoined)
    return out


def _step(tree: _Tree, g: sc.LLMCall | None, f: sc.LLMCall | None) -> Step:
    main = g if g is not None else f
    assert main is not None
    other = f if g is not None else None
    agent = (g.agent if g else None) or (f.agent if f else None)
    if agent is None and f is not None:
        agent = tree.agent(f.span)
    if agent is None and g is not None:
        agent = tree.agent(g.span)
    node = (f.node if f else None) or (g.node if g else None)
    output = main.output_message or (other.output_message if other else None)
    meta: dict[str, Any] = {"agent": agent or node or DEFAULT_AGENT, "dialect": main.dialect}
    if node:
        meta["node"] = node
    step_no = (f.node_step if f else None) or (g.node_step if g else None)
    if step_no is not None:
        meta["node_step"] = step_no
    if output is not None and output.tool_calls:
        meta["tool_names"] = [tc.name for tc in output.tool_calls]
    if g is not None:
        meta["gateway_span_id"] = g.span.span_id
    if f is not None:
        meta["framework_span_id"] = f.span.span_id
        meta["framework_dialect"] = f.dialect
    return construct(
        Step,
        id=main.span.span_id,
        trace_id=main.span.trace_id,
        sequence=g.sequence if g else None,
        input_messages=main.input_messages or (other.input_messages if other else []),
        output_message=output,
        tools=main.tools or (other.tools if other else []),
        prompt_ids=g.prompt_ids if g else None,
        response_ids=g.response_ids if g else None,
        response_logprobs=g.response_logprobs if g else None,
        finish_reason=main.finish_reason or (other.finish_reason if other else None),
        model=main.model or (other.model if other else None),
        weight_version=g.weight_version if g else None,
        tokenizer=g.tokenizer if g else None,
        start_time_ns=(f or main).span.start_ns,
        latency_s=main.latency_s if main.latency_s is not None else main.span.duration_s,
        input_tokens=main.input_tokens if main.input_tokens is not None else (other.input_tokens if other else None),
        output_tokens=main.output_tokens if main.output_tokens is not None else (other.output_tokens if other else None),
        reward=None,
        retokenized=False,
        metadata=meta,
    )


def _apply_rewards(
    rewards: list[SpanRecord], steps: list[Step], ep: dict[str, Any]
) -> dict[str, float]:
    """Per-step rewards onto steps; final rewards returned by (agent or "") + name."""
    finals: dict[str, float] = {}
    starts = [s.start_time_ns for s in steps]
    dropped = 0
    by_seq = {s.sequence: s for s in steps if s.sequence is not None}
    for r in sorted(rewards, key=lambda r: r.start_ns):
        a = r.attributes
        try:
            value = float(a[sc.REWARD_VALUE])
        except (KeyError, TypeError, ValueError):
            continue
        name = str(a.get(sc.REWARD_NAME) or "reward")
        if a.get(sc.REWARD_SCOPE) == "step":
            seq = sc._opt_int(a.get(sc.REWARD_STEP))
            target = by_seq.get(seq) if seq is not None else None
            if target is None and steps:
                # The last step that started before the reward. A step's start time is its
                # framework span's when it has one: that span and the reward span share the
                # agent's clock, so a skewed gateway clock does not move the reward.
                i = bisect.bisect_right(starts, r.start_ns) - 1
                target = steps[i] if i >= 0 else None
            if target is None:
                dropped += 1
            else:
                target.reward = (target.reward or 0.0) + value
            continue
        agent = a.get(sc.REWARD_AGENT)
        finals[f"{agent}\x00{name}" if agent else name] = value
        if sc.REWARD_IS_CORRECT in a:
            ep["is_correct"] = bool(a[sc.REWARD_IS_CORRECT])
    ep["dropped_step_rewards"] = dropped
    return finals


def _episode_info(episode_spans: list[SpanRecord]) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for s in sorted(episode_spans, key=lambda s: s.start_ns):
        a = s.attributes
        if a.get(sc.TASK_JSON):
            try:
                info["task"] = Task.model_validate_json(a[sc.TASK_JSON])
            except ValueError:
                info["task"] = Task(id=str(a.get(sc.TASK_ID, "unknown")))
        elif a.get(sc.TASK_ID) and "task" not in info:
            info["task"] = Task(id=str(a[sc.TASK_ID]))
        if a.get(sc.TERMINATION_REASON):
            try:
                info["termination_reason"] = TerminationReason(a[sc.TERMINATION_REASON])
            except ValueError:
                info["termination_reason"] = TerminationReason.ERROR
        if a.get(sc.EPISODE_ARTIFACTS):
            with contextlib.suppress(ValueError):
                artifacts = _json.loads(a[sc.EPISODE_ARTIFACTS])
                info["artifacts"] = artifacts if isinstance(artifacts, dict) else {"answer": artifacts}
        if a.get(sc.EPISODE_KIND):
            info["kind"] = str(a[sc.EPISODE_KIND])
        if a.get(sc.EPISODE_ERROR):
            info["error"] = str(a[sc.EPISODE_ERROR])
            # the stack trace rides in the episode span's exception event (record_exception)
            for event in s.events:
                if event.name == "exception" and event.attributes.get("exception.stacktrace"):
                    info["traceback"] = str(event.attributes["exception.stacktrace"])
    return info


def episode_from_spans(
    spans: Sequence[Any], *, episode_id: str | None = None, task: Task | None = None
) -> Episode:
    """Convert the spans of one episode (SpanRecords, SDK ReadableSpans or dicts)."""
    records = to_records(spans)
    tree = _Tree(records)
    metrics: Counter[str] = Counter()
    metrics["convert/duplicate_spans"] = len(records) - len(tree.spans)
    metrics["convert/orphans_reattached"] = tree.orphans
    gateway: list[sc.LLMCall] = []
    framework: list[sc.LLMCall] = []
    rewards: list[SpanRecord] = []
    episode_spans: list[SpanRecord] = []
    llm_spans: list[SpanRecord] = []
    for s in tree.spans:
        a = s.attributes
        if sc.is_llm_span(a):
            llm_spans.append(s)
        elif sc.is_reward_span(a):
            rewards.append(s)
        elif a.get(sc.SPAN_TYPE) in ("episode", "grading", "task"):  # its root, its grading, a task set later
            episode_spans.append(s)
    # Read in call order so each call's history is parsed once (see MessageCache).
    llm_spans.sort(key=lambda s: (sc._opt_int(s.attributes.get(sc.SEQUENCE)) or 0, s.start_ns))
    cache = sc.MessageCache()
    for s in llm_spans:
        call = sc.read_llm_call(s, cache)
        (gateway if call.is_gateway else framework).append(call)
    outer = _fold_framework_calls(tree, framework)
    steps = [_step(tree, g, f) for g, f in _join(tree, gateway, outer, metrics)]
    steps = call_order(steps)
    info = _episode_info(episode_spans)
    finals = _apply_rewards(rewards, steps, info)

    names: dict[str, list[Step]] = {}
    for step in steps:
        names.setdefault(step.metadata["agent"], []).append(step)
    reward = finals.get("reward")
    trajectories = []
    for name, tsteps in names.items():
        seqs, breaks = build_sequences(tsteps)
        metrics["convert/prefix_breaks"] += breaks
        trajectories.append(
            construct(
                Trajectory,
                name=name,
                steps=tsteps,
                sequences=seqs,
                reward=finals.get(f"{name}\x00reward", reward),
                prefix_breaks=breaks,
            )
        )
    link_callers(trajectories)
    missing = sum(1 for s in steps if not s.has_tokens)
    metrics["convert/steps"] = len(steps)
    metrics["convert/missing_token_ids"] = missing
    metrics["convert/dropped_step_rewards"] = info.pop("dropped_step_rewards", 0)
    reason = info.get("termination_reason")
    if reason is None or reason is TerminationReason.SUCCESS:
        if not steps:
            reason = TerminationReason.NO_LLM_CALLS
        elif missing:
            reason = TerminationReason.MISSING_TOKEN_IDS
        elif steps[-1].finish_reason == "length":
            reason = TerminationReason.TRUNCATED
        else:
            reason = TerminationReason.SUCCESS
    if episode_id is None:
        sessions = Counter(sid for sid in (s.session_id for s in tree.spans) if sid)
        episode_id = sessions.most_common(1)[0][0] if sessions else (
            TRACE_SESSION_PREFIX + records[0].trace_id if records else "empty"
        )
    return construct(
        Episode,
        id=episode_id,
        task=task if task is not None else info.get("task"),
        trajectories=trajectories,
        reward=reward,
        rewards={k: v for k, v in finals.items() if "\x00" not in k},
        is_correct=info.get("is_correct"),
        termination_reason=reason,
        error=info.get("error"),
        traceback=info.get("traceback"),
        artifacts=info.get("artifacts", {}),
        trace_ids=sorted({s.trace_id for s in tree.spans}),
        metrics={k: float(v) for k, v in sorted(metrics.items())},
        kind=info.get("kind"),
    )


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while converting a batch.

    A batch of episodes is hundreds of thousands of fresh, acyclic objects kept alive
    together; each full collection would re-walk all of them (65 % of the time for 10,000
    episodes, measured in bench/convert_throughput.py). Reference counting still frees
    everything; the collector resumes afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def episodes_from_sessions(sessions: Mapping[str, Sequence[Any]]) -> list[Episode]:
    """Convert many episodes at once: ``{episode id: its spans}`` -> Episodes, in order."""
    with _gc_paused():
        return [episode_from_spans(spans, episode_id=sid) for sid, spans in sessions.items()]


def episodes_from_store(store: Any, session_ids: Iterable[str] | None = None, **filters: Any) -> list[Episode]:
    """Convert stored sessions (all of them matching ``filters`` when none are named)."""
    if session_ids is None:
        session_ids = [s.session_id for s in store.sessions(**filters)]
    return episodes_from_sessions({sid: store.spans(session_id=sid) for sid in session_ids})


def split_sessions(spans: Sequence[Any]) -> dict[str, list[SpanRecord]]:
    """Group mixed spans by episode, the way the store does: session id, else trace."""
    records = to_records(spans)
    trace_session: dict[str, str] = {}
    for r in records:
        sid = r.session_id
        if sid:
            trace_session.setdefault(r.trace_id, sid)
    out: dict[str, list[SpanRecord]] = {}
    for r in records:
        sid = r.session_id or trace_session.get(r.trace_id) or TRACE_SESSION_PREFIX + r.trace_id
        out.setdefault(sid, []).append(r)
    return out

