"""The converter: spans -> Episode, on hand-made spans covering joins, order, masks, rewards."""

from __future__ import annotations

import json
import random

from spanfactory import (
    TOK,
    agent_span,
    framework_llm_span,
    gateway_span,
    reward_span,
    span,
)

from tracerl.core import semconv as sc
from tracerl.core.convert import episode_from_spans, split_sessions
from tracerl.core.types import Episode, Message, TerminationReason, ToolCall, group_trajectories
from tracerl.testing import IM_END

MIN = 60 * 10**9


def _three_turn_conversation(session: str = "ep", skew: int = 0) -> tuple[list, list[str]]:
    """user -> assistant(tool call text) -> tool -> assistant -> user -> assistant."""
    replies = ["call calc(2+3)", "it is 5", "yes, 5"]
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+3?"}]
    spans, t = [], 1_000
    for i, reply in enumerate(replies):
        spans.append(gateway_span(list(history), reply, seq=i, start=t + skew, session=session))
        history.append({"role": "assistant", "content": reply})
        history.append({"role": "tool" if i == 0 else "user", "content": "5" if i == 0 else "sure?"})
        t += 1_000
    return spans, replies


def test_three_turn_conversation_is_one_sequence_masked_on_model_tokens():
    spans, replies = _three_turn_conversation()
    ep = episode_from_spans(spans)
    assert ep.id == "ep" and ep.termination_reason is TerminationReason.SUCCESS
    (traj,) = ep.trajectories
    assert [s.sequence for s in traj.steps] == [0, 1, 2]
    (seq,) = traj.sequences
    assert traj.prefix_breaks == 0 and ep.metrics["convert/prefix_breaks"] == 0
    # The sequence is exactly the last prompt plus the last response.
    last = traj.steps[-1]
    assert seq.token_ids == last.prompt_ids + last.response_ids
    model_tokens = [t for t, m in zip(seq.token_ids, seq.mask) if m == 1]
    assert model_tokens == [tok for r in replies for tok in [*TOK.encode(r), IM_END]]
    for (start, end), step in zip(seq.response_spans, traj.steps):
        assert seq.token_ids[start:end] == step.response_ids
        assert all(m == 1 for m in seq.mask[start:end])
    assert sum(seq.mask) == sum(len(s.response_ids) for s in traj.steps)
    assert seq.logprobs is not None
    assert [lp for lp, m in zip(seq.logprobs, seq.mask) if m] == [-0.5] * sum(seq.mask)
    assert all(lp == 0.0 for lp, m in zip(seq.logprobs, seq.mask) if not m)


def test_edited_history_breaks_the_sequence_once():
    history = [{"role": "user", "content": "solve x"}]
    first = gateway_span(history, "draft answer", seq=0, start=100)
    # The agent rewrote its history (summarised the draft) before the second call.
    edited = [{"role": "user", "content": "solve x"}, {"role": "assistant", "content": "(summary)"},
              {"role": "user", "content": "improve"}]
    second = gateway_span(edited, "final answer", seq=1, start=200)
    ep = episode_from_spans([first, second])
    (traj,) = ep.trajectories
    assert len(traj.sequences) == 2 and traj.prefix_breaks == 1
    assert ep.metrics["convert/prefix_breaks"] == 1
    assert traj.sequences[1].token_ids == second.attributes["tracerl.llm.prompt_token_ids"] + \
        second.attributes["tracerl.llm.response_token_ids"]


def test_join_by_parent_gives_framework_attribution_and_gateway_tokens():
    agent = agent_span("solver", 0, 10_000)
    fw = framework_llm_span("42", 100, parent=agent.span_id)
    gw = gateway_span([{"role": "user", "content": "q"}], "42", seq=0, start=150, parent=fw.span_id)
    ep = episode_from_spans([agent, fw, gw])
    (step,) = ep.steps
    assert step.metadata["agent"] == "solver"
    assert step.metadata["framework_span_id"] == fw.span_id
    assert step.metadata["gateway_span_id"] == gw.span_id
    assert step.prompt_ids == gw.attributes["tracerl.llm.prompt_token_ids"]
    assert ep.metrics["convert/joined_by_parent"] == 1
    assert [t.name for t in ep.trajectories] == ["solver"]


def test_join_by_response_id_when_no_parent_link():
    fw1 = framework_llm_span("a", 100, response_id="chatcmpl-2", node="judge")
    fw2 = framework_llm_span("b", 300, response_id="chatcmpl-1", node="solver")
    gw1 = gateway_span([{"role": "user", "content": "q"}], "b", seq=0, start=50, response_id="chatcmpl-1")
    gw2 = gateway_span([{"role": "user", "content": "q"}], "a", seq=1, start=60, response_id="chatcmpl-2")
    ep = episode_from_spans([fw1, fw2, gw1, gw2])
    assert ep.metrics["convert/joined_by_response_id"] == 2
    by_seq = {s.sequence: s for s in ep.steps}
    assert by_seq[0].metadata["node"] == "solver" and by_seq[1].metadata["node"] == "judge"
    assert {t.name for t in ep.trajectories} == {"solver", "judge"}


def test_join_by_order_as_last_resort_and_refuses_mismatched_output():
    fws = [framework_llm_span(r, 100 * i, node="agent") for i, r in enumerate(["one", "two"])]
    gws = [gateway_span([{"role": "user", "content": "q"}], r, seq=i, start=5 + i) for i, r in enumerate(["one", "two"])]
    ep = episode_from_spans(fws + gws)
    assert ep.metrics["convert/joined_by_order"] == 2
    assert [s.metadata.get("framework_span_id") for s in ep.steps] == [f.span_id for f in fws]

    wrong = [framework_llm_span("something else", 0, node="agent")]
    ep = episode_from_spans(wrong + gws[:1])
    assert ep.metrics.get("convert/joined_by_order", 0) == 0
    assert ep.metrics["convert/unjoined_framework_calls"] == 1
    assert ep.termination_reason is TerminationReason.MISSING_TOKEN_IDS


def test_orphan_is_reattached_by_time_and_keeps_its_agent():
    agent = agent_span("planner", 0, 10_000)
    lost_parent = "f" * 16  # a chain span that never arrived
    fw = framework_llm_span("ok", 500, parent=lost_parent)
    gw = gateway_span([{"role": "user", "content": "q"}], "ok", seq=0, start=510, parent=fw.span_id)
    ep = episode_from_spans([agent, fw, gw])
    assert ep.metrics["convert/orphans_reattached"] == 1
    assert ep.steps[0].metadata["agent"] == "planner"


def test_duplicates_and_arrival_order_do_not_change_the_episode():
    spans, _ = _three_turn_conversation()
    spans.append(reward_span(1.0, 10_000))
    expected = episode_from_spans(spans)
    shuffled = spans + spans[:2]
    random.Random(0).shuffle(shuffled)
    got = episode_from_spans(shuffled)
    assert got.metrics["convert/duplicate_spans"] == 2
    got.metrics.pop("convert/duplicate_spans")
    expected.metrics.pop("convert/duplicate_spans")
    assert got == expected


def test_gateway_clock_skew_of_minutes_keeps_order_and_step_rewards():
    # The gateway's clock runs 5 minutes behind the agent's; order is the sequence number and
    # per-step rewards follow the framework spans, which share the agent's clock.
    agent = agent_span("solver", 0, 100_000)
    spans, steps = [agent], []
    for i in range(3):
        fw = framework_llm_span(f"r{i}", 10_000 * (i + 1), parent=agent.span_id)
        gw = gateway_span([{"role": "user", "content": f"q{i}"}], f"r{i}", seq=i,
                          start=10_000 * (3 - i) - 5 * MIN, parent=fw.span_id)
        spans += [fw, gw]
        steps.append(fw)
    spans.append(reward_span(0.25, 10_000 * 2 + 500, step=True))  # after the second call
    ep = episode_from_spans(spans)
    assert [s.sequence for s in ep.steps] == [0, 1, 2]
    assert [s.reward for s in ep.steps] == [None, 0.25, None]


def test_final_and_per_agent_rewards():
    judge = agent_span("judge", 5_000, 9_000)
    solver = agent_span("solver", 0, 4_000)
    spans = [
        solver, judge,
        gateway_span([{"role": "user", "content": "q"}], "7", seq=0, start=100, parent=solver.span_id),
        gateway_span([{"role": "user", "content": "is 7 right?"}], "yes", seq=1, start=6_000, parent=judge.span_id),
        reward_span(1.0, 9_500),
        reward_span(0.5, 9_600, agent="judge"),
        reward_span(0.1, 9_700, name="format"),
    ]
    ep = episode_from_spans(spans)
    assert ep.reward == 1.0 and ep.rewards == {"reward": 1.0, "format": 0.1}
    assert ep.trajectory("solver").reward == 1.0
    assert ep.trajectory("judge").reward == 0.5


def test_termination_reasons_from_content():
    assert episode_from_spans([reward_span(1.0, 0)]).termination_reason is TerminationReason.NO_LLM_CALLS
    fw_only = episode_from_spans([framework_llm_span("x", 0)])
    assert fw_only.termination_reason is TerminationReason.MISSING_TOKEN_IDS
    assert fw_only.steps[0].prompt_ids is None and fw_only.trajectories[0].sequences == []
    cut = gateway_span([{"role": "user", "content": "q"}], "aaaa", seq=0, start=0, finish="length")
    assert episode_from_spans([cut]).termination_reason is TerminationReason.TRUNCATED


def test_episode_span_carries_task_and_failure():
    root = span("tracerl.episode", 0, 100, {
        "tracerl.span.type": "episode", "tracerl.session.id": "ep", "tracerl.task.id": "t-1",
        "tracerl.task.json": json.dumps({"id": "t-1", "data": {"q": "2+2"}, "answer": 4}),
        "tracerl.episode.termination_reason": "timeout", "tracerl.episode.error": "TimeoutError: 60s",
    })
    gw = gateway_span([{"role": "user", "content": "2+2"}], "4", seq=0, start=10, parent=root.span_id)
    ep = episode_from_spans([root, gw])
    assert ep.task is not None and ep.task.id == "t-1" and ep.task.answer == 4
    assert ep.termination_reason is TerminationReason.TIMEOUT and "60s" in ep.error


def test_megabyte_attribute_values_convert():
    big = "x" * 1_500_000
    gw = gateway_span([{"role": "user", "content": big}], "ok", seq=0, start=0)
    ep = episode_from_spans([gw])
    assert ep.steps[0].input_messages[0].content == big
    assert len(ep.trajectories[0].sequences[0]) > 1_500_000


def test_episode_json_round_trip_is_exact_including_non_finite_logprobs():
    spans, _ = _three_turn_conversation()
    spans.append(reward_span(0.75, 5_000, step=True))
    ep = episode_from_spans(spans)
    ep.trajectories[0].steps[0].response_logprobs[0] = float("-inf")
    ep.trajectories[0].sequences[0].logprobs[-1] = float("-inf")
    again = Episode.model_validate_json(ep.model_dump_json())
    assert again == ep
    assert again.model_dump_json() == ep.model_dump_json()


def test_split_sessions_and_groups():
    a, _ = _three_turn_conversation(session="a")
    b = [gateway_span([{"role": "user", "content": "q"}], "r", seq=0, start=0, session="b", trace="cd" * 16)]
    groups = split_sessions(a + b)
    assert set(groups) == {"a", "b"} and len(groups["a"]) == 3
    episodes = [episode_from_spans(v, episode_id=k) for k, v in groups.items()]
    for ep in episodes:
        ep.task = None
    grouped = group_trajectories(episodes)
    assert [(g.task_id, g.name, len(g.trajectories)) for g in grouped] == [("a", "main", 1), ("b", "main", 1)]


# --- the optimised reading path against a straightforward reference ------------------------


def _random_message(rng: random.Random, role: str, n: int) -> Message:
    words = " ".join(rng.choices(["alpha", "beta", "é", "\"q\"", "\\n", "7", "{", "]"], k=rng.randint(1, 6)))
    if role == "assistant" and rng.random() < 0.6:
        calls = [ToolCall(id=f"call_{n}_{k}", name=rng.choice(["calc", "search"]),
                          arguments=rng.choice([json.dumps({"q": words, "k": k}, separators=(",", ":")),
                                                "not json", "[1,2]"]))
                 for k in range(rng.randint(1, 2))]
        return Message(role=role, content=rng.choice([None, words]), tool_calls=calls,
                       reasoning=rng.choice([None, "think " + words]))
    if role == "tool":
        return Message(role=role, content=rng.choice([words, '{"result": 5}']), tool_call_id=f"call_{n}_0")
    return Message(role=role, content=words, name=rng.choice([None, None, "ann"]))


def _as_json(rng: random.Random, messages: list[Message], style: str) -> str:
    """The same messages as different writers put them in ``gen_ai.input.messages``."""
    if style == "gateway":
        return sc.genai_message_json(messages)
    if style == "openai":
        docs = [{"role": m.role, "content": m.content, **({"name": m.name} if m.name else {}),
                 **({"tool_call_id": m.tool_call_id} if m.tool_call_id else {}),
                 **({"tool_calls": [{"id": c.id, "type": "function",
                                     "function": {"name": c.name, "arguments": c.arguments}}
                                    for c in m.tool_calls]} if m.tool_calls else {})}
                for m in messages if not m.reasoning]
        return json.dumps(docs)
    docs = json.loads(sc.genai_message_json(messages))
    return json.dumps(docs, indent=rng.choice([None, 1])) if style == "spaced" else json.dumps(docs, indent="\t")


def _varied_session(rng: random.Random, session: str, trace: str) -> list:
    """A gateway conversation with tool calls, history edits, odd JSON and token oddities."""
    style = rng.choice(["gateway", "gateway", "spaced", "tabs", "openai"])
    history = [Message(role="system", content="be exact"), _random_message(rng, "user", 0)]
    prompt = [rng.randrange(1000) for _ in range(rng.randint(3, 9))]
    spans, seen = [], []
    for seq in range(rng.randint(1, 7)):
        if style == "openai":  # OpenAI-shaped messages carry no reasoning
            history = [m.model_copy(update={"reasoning": None}) for m in history]
        out = _random_message(rng, "assistant", seq)
        if style == "openai":
            out = out.model_copy(update={"reasoning": None})
        response = [rng.randrange(1000) for _ in range(rng.randint(1, 5))]
        raw_out = json.loads(sc.genai_message_json([out]))
        if rng.random() < 0.3:
            raw_out[0]["finish_reason"] = "stop"
        attrs = {
            sc.SPAN_TYPE: "llm", sc.SOURCE: "gateway", sc.SESSION_ID: session, sc.SEQUENCE: seq,
            "gen_ai.operation.name": "chat", "gen_ai.response.model": "tiny",
            "gen_ai.input.messages": _as_json(rng, history, style),
            "gen_ai.output.messages": json.dumps(raw_out, separators=(",", ":")),
            "gen_ai.tool.definitions": json.dumps([{"type": "function", "name": "calc"}]),
        }
        if rng.random() < 0.9:  # else: a call the gateway saw without token ids
            attrs[sc.PROMPT_IDS], attrs[sc.RESPONSE_IDS] = list(prompt), response
            if rng.random() < 0.8:  # else no logprobs, or one too few
                attrs[sc.RESPONSE_LOGPROBS] = [-0.25 * (i + 1) for i in range(len(response) - (rng.random() < 0.2))]
        if rng.random() < 0.1:  # a valid history followed by junk: not JSON, so no messages
            attrs["gen_ai.input.messages"] += " ]"
        spans.append(span(f"chat #{seq}", 1000 * seq, 1000 * seq + 10, attrs, trace=trace))
        if rng.random() < 0.2:  # the agent resends its answer edited: the output must not be reused
            out = out.model_copy(update={"content": (out.content or "") + " (edited)"})
        if rng.random() < 0.8:  # else a retry: the same history again
            history = history + [out] + [_random_message(rng, "tool" if out.tool_calls else "user", seq)]
        if rng.random() < 0.15:  # the agent rewrote its history: no common prefix with the last call
            history = [history[0], Message(role="user", content="summary"), *history[-1:]]
        glue = [rng.randrange(1000) for _ in range(rng.randint(0, 3))]
        seen.append(prompt + response)
        roll = rng.random()
        if roll < 0.7:
            prompt = prompt + response + glue
        elif roll < 0.8:  # back to an earlier context (interleaved chains), or its reply re-rendered
            earlier = rng.choice(seen)
            prompt = earlier + glue if rng.random() < 0.7 else earlier[:-1] + [1001] + glue
        elif roll < 0.9:  # the reply re-rendered: the same prompt, another last token
            prompt = prompt + response[:-1] + [1002] + glue
        else:  # a fresh context
            prompt = [rng.randrange(1000) for _ in range(4)]
    return spans


def _reference_sequences(steps: list) -> tuple[list[tuple], int]:
    """Token-in/token-out the plain way: (ids, mask, logprobs, step indices, spans, parent, start)
    per chain; a step joins the longest open chain its prompt extends, else starts one (a break
    when its prompt holds an open chain up to that chain's last reply)."""
    out, breaks, live, last = [], 0, [], None
    for i, st in enumerate(steps):
        if st.prompt_ids is None or st.response_ids is None:
            live, last = [], None
            continue
        lp = st.response_logprobs
        lp = lp if lp is not None and len(lp) == len(st.response_ids) else None
        going = [k for k in live if st.prompt_ids[:len(out[k][0])] == out[k][0]]
        if going:
            k = max(going, key=lambda k: len(out[k][0]))
            extra = st.prompt_ids[len(out[k][0]):]
        else:
            broken = [k for k in live if st.prompt_ids[:out[k][4][-1][0]] == out[k][0][:out[k][4][-1][0]]]
            if broken:
                breaks += 1
                live.remove(broken[-1])
                out.append(([], [], [], [], [], broken[-1], "break"))
            else:
                out.append(([], [], [], [], [], last, "fresh" if out else "first"))
            k = len(out) - 1
            live.append(k)
            extra = st.prompt_ids
        last = k
        ids, mask, lps, idx, spans, _, _ = out[k]
        ids += extra
        mask += [0] * len(extra)
        start = len(ids)
        ids += st.response_ids
        mask += [1] * len(st.response_ids)
        lps += [0.0] * len(extra) + (lp if lp is not None else [None])  # None: no logprobs for this sequence
        idx.append(i)
        spans.append((start, len(ids)))
    return [(ids, mask, None if None in lps else lps, idx, spans, parent, begun)
            for ids, mask, lps, idx, spans, parent, begun in out], breaks


def test_optimised_reading_equals_a_straightforward_reference_on_varied_spans():
    rng = random.Random(7)
    for n in range(60):
        trace = format(n + 1, "032x")
        spans = _varied_session(rng, f"s{n}", trace)
        shuffled = spans + rng.sample(spans, k=min(2, len(spans)))  # duplicates, any arrival order
        rng.shuffle(shuffled)
        ep = episode_from_spans(shuffled)
        by_id = {s.span_id: s for s in spans}
        (traj,) = ep.trajectories
        assert [st.sequence for st in traj.steps] == list(range(len(spans)))
        for st in traj.steps:
            # Reference: the span read on its own, without the episode's message cache, and
            # every message validated by pydantic from its own JSON.
            ref = sc.read_llm_call(by_id[st.id])
            assert st.input_messages == ref.input_messages and st.output_message == ref.output_message
            assert st.tools == ref.tools and st.finish_reason == ref.finish_reason
            for m in [*st.input_messages, st.output_message]:
                assert Message.model_validate_json(m.model_dump_json()) == m
        seqs, breaks = _reference_sequences(traj.steps)
        assert traj.prefix_breaks == breaks
        assert [(s.token_ids, s.mask, s.logprobs, s.step_indices, s.response_spans, s.parent, s.start)
                for s in traj.sequences] == seqs
        # Shared message objects survive the JSON round trip, and validation re-creates the same.
        again = Episode.model_validate_json(ep.model_dump_json())
        assert again == ep and again.model_dump_json() == ep.model_dump_json()
        assert Episode.model_validate(ep.model_dump()).model_dump_json() == ep.model_dump_json()


def test_ground_truth_messages_come_back_and_each_is_read_once():
    rng = random.Random(3)
    history = [Message(role="system", content="sys"), Message(role="user", content="q", name="ann")]
    spans = []
    outs = []
    for seq in range(5):
        out = _random_message(rng, "assistant", seq)
        attrs = {sc.SPAN_TYPE: "llm", sc.SOURCE: "gateway", sc.SEQUENCE: seq, "gen_ai.operation.name": "chat",
                 "gen_ai.input.messages": sc.genai_message_json(history),
                 "gen_ai.output.messages": sc.genai_message_json([out]),
                 sc.PROMPT_IDS: [1, 2, seq], sc.RESPONSE_IDS: [3]}
        spans.append(span(f"chat #{seq}", seq * 10, seq * 10 + 5, attrs))
        outs.append(out)
        history = [*history, out, _random_message(rng, "tool" if out.tool_calls else "user", seq)]
    ep = episode_from_spans(spans)
    steps = ep.steps
    for k, st in enumerate(steps):
        assert st.output_message == outs[k]
        assert st.input_messages == history[: 2 + 2 * k]
        if k:  # the history is parsed once: earlier messages, and the last answer, are shared
            assert all(a is b for a, b in zip(st.input_messages, steps[k - 1].input_messages))
            assert st.input_messages[-2] is steps[k - 1].output_message
