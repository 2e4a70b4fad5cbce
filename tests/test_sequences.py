"""Chains: one trajectory's calls as training sequences when contexts interleave (sub-agents,
handoffs, compaction), with their lineage, and prefix breaks told apart from fresh contexts."""

from __future__ import annotations

from tracerl.core.sequences import build_sequences
from tracerl.core.types import Step

SYSTEM_A, SYSTEM_B = [1, 2, 3], [7, 8]


def _step(n: int, prompt: list[int], response: list[int]) -> Step:
    return Step(id=f"s{n}", prompt_ids=prompt, response_ids=response, response_logprobs=[-0.5] * len(response))


def test_interleaved_turns_of_two_contexts_are_two_rows_with_their_lineage():
    a1 = _step(0, SYSTEM_A, [10, 11])
    b1 = _step(1, SYSTEM_B, [20])
    a2 = _step(2, SYSTEM_A + [10, 11] + [5], [12])  # A's history, a tool result, A's next reply
    b2 = _step(3, SYSTEM_B + [20] + [6, 6], [21, 22])
    (a, b), breaks = build_sequences([a1, b1, a2, b2])
    assert breaks == 0
    assert a.token_ids == [1, 2, 3, 10, 11, 5, 12] and a.mask == [0, 0, 0, 1, 1, 0, 1] and a.step_indices == [0, 2]
    assert b.token_ids == [7, 8, 20, 6, 6, 21, 22] and b.step_indices == [1, 3]
    assert (a.start, a.parent, b.start, b.parent) == ("first", None, "fresh", 0)  # B was called from A


def test_a_supervisor_calling_a_sub_agent_k_times_is_k_plus_one_rows_and_no_break():
    k = 3
    steps, supervisor = [], list(SYSTEM_A)
    for i in range(k):
        steps.append(_step(len(steps), supervisor, [30 + i]))  # the supervisor delegates
        supervisor = supervisor + [30 + i]
        steps.append(_step(len(steps), SYSTEM_B + [40 + i], [50 + i]))  # a fresh sub-agent context each time
        supervisor = supervisor + [9, 50 + i]  # the sub-agent's answer comes back as a tool result
    steps.append(_step(len(steps), supervisor, [60]))
    sequences, breaks = build_sequences(steps)
    assert breaks == 0 and len(sequences) == k + 1
    head, *subs = sequences
    assert head.step_indices == [0, 2, 4, 6] and sum(head.mask) == k + 1
    assert [s.step_indices for s in subs] == [[1], [3], [5]]
    assert all(s.start == "fresh" and s.parent == 0 for s in subs)


def test_a_reply_that_comes_back_re_rendered_is_a_break_and_a_compaction_is_not():
    first = _step(0, SYSTEM_A, [10, 11])
    rerendered = _step(1, SYSTEM_A + [10, 99, 5], [12])  # the template wrote the reply's last token anew
    compacted = _step(2, [1, 4, 4], [13])  # the system prompt, then a summary: a fresh context
    sequences, breaks = build_sequences([first, rerendered, compacted])
    assert breaks == 1 and [s.start for s in sequences] == ["first", "break", "fresh"]
    assert [s.parent for s in sequences] == [None, 0, 1]


def test_a_step_extends_the_longest_chain_it_continues_and_one_without_ids_ends_them_all():
    steps = [_step(0, [1], [2]), _step(1, [1, 2, 3], [4]), _step(2, [1, 2, 3, 4, 5], [6])]
    (seq,), breaks = build_sequences(steps)
    assert breaks == 0 and seq.step_indices == [0, 1, 2]
    blind = Step(id="x", prompt_ids=None, response_ids=None)
    (before, after), breaks = build_sequences([steps[0], blind, steps[1]])
    assert breaks == 0 and after.start == "fresh" and after.token_ids == [1, 2, 3, 4]
