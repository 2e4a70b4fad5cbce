"""Token-in/token-out: turn one trajectory's steps into training sequences.

Calls whose prompt ids extend an earlier call's prompt + response ids token for token merge
into one sequence (a chain): the model's tokens get mask 1, the tokens inserted between calls
(tool results, user turns, the chat template's glue) get mask 0. One trajectory may hold
several chains (a sub-agent's fresh contexts, a compaction), each a training row with its
lineage (``TokenSequence.parent``, ``parent_agent``, ``start``); a reply that came back
re-rendered ends its chain and is counted as a prefix break (see :func:`build_sequences`).
A sub-agent with a name of its own is a trajectory of its own, and its contexts name the
chain of the agent that called them (:func:`link_callers`). Text is never re-tokenized
here: steps without ids end the current sequence and are left out (the episode's
termination reason says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .types import Step, TokenSequence, Trajectory, construct


def _sequence(ids: list[int], spans: list[tuple[int, int]], indices: list[int],
              step_logprobs: list[list[float]] | None, parent: int | None, begun: str) -> TokenSequence:
    """One sequence from its tokens and the (start, end) of each merged step's response."""
    mask = [0] * len(ids)
    for start, end in spans:
        mask[start:end] = [1] * (end - start)
    logprobs: list[float] | None = None
    if step_logprobs is not None:
        logprobs = [0.0] * len(ids)
        for (start, end), lp in zip(spans, step_logprobs):
            logprobs[start:end] = lp
    return construct(TokenSequence, token_ids=ids, mask=mask, logprobs=logprobs, step_indices=indices,
                     response_spans=spans, parent=parent, parent_agent=None, start=begun)


@dataclass
class _Chain:
    ids: list[int]
    parent: int | None  # the chain this one came from (see TokenSequence.parent)
    start: str  # "first", "fresh" or "break"
    indices: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    logprobs: list[list[float]] | None = field(default_factory=list)  # None once a step lacks them
    open: bool = True

    def extends(self, prompt: list[int]) -> bool:
        return len(prompt) >= len(self.ids) and prompt[: len(self.ids)] == self.ids

    def rerenders(self, prompt: list[int]) -> bool:
        """The prompt holds this chain up to its last reply, then not that reply as sampled."""
        cut = self.spans[-1][0]
        return len(prompt) >= cut and prompt[:cut] == self.ids[:cut]

    def add(self, index: int, step: Step) -> None:
        prompt, response = step.prompt_ids or [], step.response_ids or []
        self.ids += prompt[len(self.ids):]  # tokens inserted between the calls: not the model's
        lp = step.response_logprobs
        if self.logprobs is not None:
            self.logprobs = self.logprobs + [lp] if lp is not None and len(lp) == len(response) else None
        self.indices.append(index)
        self.spans.append((len(self.ids), len(self.ids) + len(response)))
        self.ids += response


def build_sequences(steps: Sequence[Step]) -> tuple[list[TokenSequence], int]:
    """Return ``(sequences, prefix_breaks)`` for steps already in call order.

    A step extends the open chain whose tokens its prompt continues (the longest, when several
    do), so the interleaved turns A1, B1, A2, B2 of two contexts make two sequences, not four.
    A step that extends none starts a chain. It is a *prefix break* (counted) when its prompt
    holds an open chain up to that chain's last reply but not the reply as sampled: the reply
    came back re-rendered or edited, and that chain ends there. Otherwise it is a *fresh
    context* (a sub-agent, a handoff, a compaction, a rewritten history; not counted), whose
    parent is the chain of the call just before it. A step without token ids ends every chain.
    """
    chains: list[_Chain] = []
    breaks = 0
    last: int | None = None
    for i, step in enumerate(steps):
        prompt = step.prompt_ids
        if prompt is None or step.response_ids is None:
            for chain in chains:
                chain.open = False
            last = None
            continue
        live = [k for k, c in enumerate(chains) if c.open]
        going = [k for k in live if chains[k].extends(prompt)]
        if going:
            last = max(going, key=lambda k: len(chains[k].ids))
        else:
            broken = next((k for k in reversed(live) if chains[k].rerenders(prompt)), None)
            if broken is not None:
                breaks += 1
                chains[broken].open = False
                chains.append(_Chain([], broken, "break"))
            else:
                chains.append(_Chain([], last, "fresh" if chains else "first"))
            last = len(chains) - 1
        chains[last].add(i, step)
    return [_sequence(c.ids, c.spans, c.indices, c.logprobs, c.parent, c.start) for c in chains], breaks


def call_order(steps: Sequence[Step]) -> list[Step]:
    """Steps in call order: gateway sequence numbers are the truth; steps without one are
    merged in by start time."""
    numbered = sorted((s for s in steps if s.sequence is not None), key=lambda s: (s.sequence, s.start_time_ns))
    loose = sorted((s for s in steps if s.sequence is None), key=lambda s: s.start_time_ns)
    if not numbered or not loose:
        return numbered or loose
    out: list[Step] = []
    i = 0
    for s in numbered:
        while i < len(loose) and loose[i].start_time_ns < s.start_time_ns:
            out.append(loose[i])
            i += 1
        out.append(s)
    out.extend(loose[i:])
    return out


def link_callers(trajectories: Sequence[Trajectory]) -> None:
    """Give each context that another agent's call came just before a parent in that agent's
    trajectory: a sub-agent's contexts then name the supervisor's chain that called them
    (``parent_agent``, ``parent``; ``start`` "fresh"), not the sub-agent's previous context.

    Lineage is by call order, which is what the spans hold for sure: the caller of a context
    is the chain of the episode's last call before it. Contexts of one agent that follow each
    other (a compaction, a sub-agent's second turn) keep the parent :func:`build_sequences`
    gave them."""
    home: dict[int, tuple[str, int]] = {}  # id(step) -> (trajectory, chain index)
    firsts: list[tuple[int, Trajectory, TokenSequence]] = []
    for traj in trajectories:
        for k, seq in enumerate(traj.sequences):
            for i in seq.step_indices:
                home[id(traj.steps[i])] = (traj.name, k)
    order = call_order([s for t in trajectories for s in t.steps])
    position = {id(s): n for n, s in enumerate(order)}
    for traj in trajectories:
        firsts.extend((position[id(traj.steps[seq.step_indices[0]])], traj, seq)
                      for seq in traj.sequences if seq.start != "break" and seq.step_indices)
    for n, traj, seq in firsts:
        caller = next((home[id(s)] for s in reversed(order[:n]) if id(s) in home), None)
        if caller is not None and caller[0] != traj.name:
            seq.parent_agent, seq.parent, seq.start = caller[0], caller[1], "fresh"
