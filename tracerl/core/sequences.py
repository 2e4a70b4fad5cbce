"""Token-in/token-out: turn one trajectory's steps into training sequences.

Consecutive calls whose prompt ids extend the previous prompt + response ids token for
token merge into one sequence: the model's tokens get mask 1, the tokens inserted between
calls (tool results, user turns, the chat template's glue) get mask 0. Where a prompt does
not extend the sequence (history edited, summarised, re-templated) a new sequence starts and
the break is counted. Text is never re-tokenized here: steps without ids end the current
sequence and are left out (the episode's termination reason says so).
"""

from __future__ import annotations

from collections.abc import Sequence

from .types import Step, TokenSequence, construct


def _sequence(ids: list[int], spans: list[tuple[int, int]], indices: list[int],
              step_logprobs: list[list[float]] | None) -> TokenSequence:
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
                     response_spans=spans)


def build_sequences(steps: Sequence[Step]) -> tuple[list[TokenSequence], int]:
    """Return ``(sequences, prefix_breaks)`` for steps already in call order."""
    sequences: list[TokenSequence] = []
    breaks = 0
    ids: list[int] = []
    indices: list[int] = []
    spans: list[tuple[int, int]] = []
    step_logprobs: list[list[float]] | None = []  # None once a step of the sequence lacks them
    for i, step in enumerate(steps):
        prompt, response = step.prompt_ids, step.response_ids
        if prompt is None or response is None:
            if indices:
                sequences.append(_sequence(ids, spans, indices, step_logprobs))
            ids, indices, spans, step_logprobs = [], [], [], []
            continue
        n = len(ids)
        if indices and len(prompt) >= n and prompt[:n] == ids:
            ids += prompt[n:]  # tokens inserted between the calls: not the model's
        else:
            if indices:
                breaks += 1
                sequences.append(_sequence(ids, spans, indices, step_logprobs))
                step_logprobs = []
            ids, indices, spans = list(prompt), [], []
        lp = step.response_logprobs
        if step_logprobs is not None:
            if lp is not None and len(lp) == len(response):
                step_logprobs.append(lp)
            else:
                step_logprobs = None
        start = len(ids)
        ids += response
        indices.append(i)
        spans.append((start, len(ids)))
    if indices:
        sequences.append(_sequence(ids, spans, indices, step_logprobs))
    return sequences, breaks
