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


def build_sequences(steps: Sequence[Step]) -> tuple[list[TokenSequence], int]:
    """Return ``(sequences, prefix_breaks)`` for steps already in call order."""
    sequences: list[TokenSequence] = []
    breaks = 0
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] | None = []
    indices: list[int] = []
    spans: list[tuple[int, int]] = []

    def close() -> None:
        if indices:
            sequences.append(
                construct(
                    TokenSequence,
                    token_ids=ids, mask=mask, logprobs=logprobs, step_indices=indices, response_spans=spans
                )
            )

    for i, step in enumerate(steps):
        prompt, response = step.prompt_ids, step.response_ids
        if prompt is None or response is None:
            close()
            ids, mask, logprobs, indices, spans = [], [], [], [], []
            continue
        n = len(ids)
        if indices and len(prompt) >= n and prompt[:n] == ids:
            extra = prompt[n:]  # tokens inserted between the calls: not the model's
        else:
            if indices:
                breaks += 1
            close()
            ids, mask, logprobs, indices, spans = [], [], [], [], []
            extra = prompt
        ids.extend(extra)
        mask.extend([0] * len(extra))
        step_lp = step.response_logprobs
        if logprobs is not None and step_lp is not None and len(step_lp) == len(response):
            logprobs.extend([0.0] * len(extra))
            logprobs.extend(step_lp)
        else:
            logprobs = None
        start = len(ids)
        ids.extend(response)
        mask.extend([1] * len(response))
        indices.append(i)
        spans.append((start, len(ids)))
    close()
    return sequences, breaks
