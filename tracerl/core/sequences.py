"""Token-in/token-out: turn one trajectory's steps into training sequences.

Calls whose prompt ids extend an earlier call's prompt + response ids token for token merge
into one sequence (a chain): the model's tokens get mask 1, the tokens inserted between calls
(tool results, user turns, the chat template's glue) get mask 0. One trajectory may hold
several chains (a sub-agent's fresh contexts, a compaction), each a training row with its
lineage (``TokenSequence.parent``, ``start``); a reply that came back re-rendered ends its
chain and is counted as a prefix break (see :func:`build_sequences`). Text is never re-tokenized here: steps without ids end the current
sequence and are left out (the episode's termination reason says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .types import Step, TokenSequence, construct


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
                     response_spans=spans, parent=parent, start=begun)


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
