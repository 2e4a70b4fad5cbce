"""The gateway with the bundled tiny model, driven by real clients over real HTTP."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError, OpenAI

from tracerl.core.convert import episode_from_spans
from tracerl.core.store import SpanStore
from tracerl.engines.base import SamplingParams
from tracerl.gateway import GatewayServer
from tracerl.gateway.protocol import parse_tool_calls
from tracerl.testing import ScriptedEngine

MSG = [{"role": "user", "content": "What is 12 + 30?"}]
TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]


@pytest.fixture
def gateway(tiny_engine, store):
    with GatewayServer(tiny_engine, store) as gw:
        yield gw


def _spans(store, session):
    return [r for r in store.spans(session_id=session) if r.attributes.get("tracerl.source") == "gateway"]


def test_openai_sync_tokens_in_span_decode_to_returned_text(gateway, store, tiny_engine):
    client = OpenAI(base_url=gateway.session_url("s-sync"), api_key="x")
    reply = client.chat.completions.create(model="tracerl-tiny", messages=MSG, max_tokens=24, temperature=1.0)
    (span,) = _spans(store, "s-sync")
    a = span.attributes
    tok = tiny_engine.tokenizer
    assert tok.decode(a["tracerl.llm.response_token_ids"], skip_special_tokens=True) == reply.choices[0].message.content
    assert a["tracerl.llm.prompt_token_ids"] == list(tok.apply_chat_template(
        MSG, add_generation_prompt=True, tokenize=True, return_dict=False))
    assert len(a["tracerl.llm.response_logprobs"]) == len(a["tracerl.llm.response_token_ids"])
    assert a["gen_ai.response.id"] == reply.id and a["tracerl.llm.sequence"] == 0
    assert reply.usage.completion_tokens == len(a["tracerl.llm.response_token_ids"])


def test_streaming_and_non_streaming_record_the_same_data(gateway, store):
    client = OpenAI(base_url=gateway.session_url("s-stream"), api_key="x")
    plain = client.chat.completions.create(model="tracerl-tiny", messages=MSG, max_tokens=24, seed=7)
    chunks = list(client.chat.completions.create(
        model="tracerl-tiny", messages=MSG, max_tokens=24, seed=7, stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == plain.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    first, second = _spans(store, "s-stream")
    keys = ("tracerl.llm.prompt_token_ids", "tracerl.llm.response_token_ids", "tracerl.llm.response_logprobs",
            "gen_ai.output.messages", "gen_ai.input.messages")
    assert all(first.attributes[k] == second.attributes[k] for k in keys)
    assert (first.attributes["gen_ai.request.stream"], second.attributes["gen_ai.request.stream"]) == (False, True)
    assert sorted(s.attributes["tracerl.llm.sequence"] for s in (first, second)) == [0, 1]


async def test_async_client_concurrent_requests_are_batched(gateway, store, tiny_engine):
    client = AsyncOpenAI(base_url=gateway.session_url("s-async"), api_key="x")
    before = tiny_engine.batches
    replies = await asyncio.gather(*(
        client.chat.completions.create(model="tracerl-tiny", messages=[{"role": "user", "content": f"What is {i} + 1?"}],
                                       max_tokens=16) for i in range(12)))
    await client.close()
    assert len(replies) == 12
    assert tiny_engine.batches - before < 12  # requests shared forward passes
    assert sorted(s.attributes["tracerl.llm.sequence"] for s in _spans(store, "s-async")) == list(range(12))


def test_logprobs_match_a_trainer_side_recomputation(gateway, store, tiny_engine):
    import torch

    client = OpenAI(base_url=gateway.session_url("s-lp"), api_key="x")
    for temperature in (1.0, 0.7):
        reply = client.chat.completions.create(model="tracerl-tiny", messages=MSG, max_tokens=24,
                                               temperature=temperature, logprobs=True)
        returned = [t.logprob for t in reply.choices[0].logprobs.content]
        span = max(_spans(store, "s-lp"), key=lambda s: s.attributes["tracerl.llm.sequence"])
        prompt, response = span.attributes["tracerl.llm.prompt_token_ids"], span.attributes["tracerl.llm.response_token_ids"]
        ids = torch.tensor([prompt + response])
        with torch.no_grad():
            logits = tiny_engine.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()  # [R, V]
        recomputed = torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(response)[:, None])[:, 0]
        assert torch.allclose(recomputed, torch.tensor(returned), atol=1e-4)
        assert returned == span.attributes["tracerl.llm.response_logprobs"]


def test_sampling_parameters_are_honoured(tiny_engine):
    prompt = list(tiny_engine.tokenizer.apply_chat_template(MSG, add_generation_prompt=True, tokenize=True, return_dict=False))
    a = tiny_engine.generate_sync(prompt, SamplingParams(max_tokens=12, seed=3, n=2))
    b = tiny_engine.generate_sync(prompt, SamplingParams(max_tokens=12, seed=3, n=2))
    assert [g.token_ids for g in a] == [g.token_ids for g in b]  # seeded
    assert all(len(g.token_ids) <= 12 for g in a)
    greedy = tiny_engine.generate_sync(prompt, SamplingParams(max_tokens=12, temperature=0))
    again = tiny_engine.generate_sync(prompt, SamplingParams(max_tokens=12, temperature=0))
    assert greedy[0].token_ids == again[0].token_ids
    top1 = tiny_engine.generate_sync(prompt, SamplingParams(max_tokens=12, top_k=1, seed=1))
    assert top1[0].token_ids == greedy[0].token_ids and all(lp == 0.0 for lp in top1[0].logprobs)
    nucleus = tiny_engine.generate_sync(prompt, SamplingParams(max_tokens=12, top_p=1e-6, seed=2))
    assert nucleus[0].token_ids == greedy[0].token_ids


def test_stop_strings_cut_the_text_but_not_the_recorded_tokens(gateway, store, tiny_engine):
    from tracerl.tasks.synthetic import SYSTEM_PROMPT

    client = OpenAI(base_url=gateway.session_url("s-stop"), api_key="x")
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, *MSG]  # the model answers at length
    full = client.chat.completions.create(model="tracerl-tiny", messages=messages, max_tokens=24, temperature=0)
    text = full.choices[0].message.content
    assert len(text) > 3
    stop = text[2:4]
    cut = client.chat.completions.create(model="tracerl-tiny", messages=messages, max_tokens=24, temperature=0,
                                         stop=[stop])
    assert cut.choices[0].message.content == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_session_from_path_baggage_traceparent_or_unassigned(gateway, store):
    body = {"model": "tracerl-tiny", "messages": MSG, "max_tokens": 4}
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    httpx.post(f"{gateway.url}/v1/chat/completions", json=body,
               headers={"baggage": "tracerl.session_id=from-baggage",
                        "traceparent": f"00-{trace_id}-{parent}-01"}).raise_for_status()
    (span,) = _spans(store, "from-baggage")
    assert (span.trace_id, span.parent_span_id) == (trace_id, parent)
    httpx.post(f"{gateway.url}/v1/chat/completions", json=body).raise_for_status()
    assert len(_spans(store, "unassigned")) == 1


def test_vllm_style_token_id_extras(gateway):
    doc = httpx.post(f"{gateway.url}/v1/chat/completions", json={
        "model": "tracerl-tiny", "messages": MSG, "max_tokens": 8, "return_token_ids": True, "logprobs": True}).json()
    choice = doc["choices"][0]
    assert isinstance(doc["prompt_token_ids"], list) and len(choice["token_ids"]) == len(choice["logprobs"]["content"])
    comp = httpx.post(f"{gateway.url}/v1/completions", json={
        "model": "tracerl-tiny", "prompt": doc["prompt_token_ids"], "max_tokens": 8, "return_token_ids": True,
        "logprobs": 1}).json()
    assert comp["choices"][0]["prompt_token_ids"] == doc["prompt_token_ids"]
    assert len(comp["choices"][0]["logprobs"]["token_logprobs"]) == len(comp["choices"][0]["token_ids"])


def test_bad_requests_get_openai_style_4xx_and_the_server_lives(gateway, store):
    url = f"{gateway.url}/v1/chat/completions"
    cases = [
        (httpx.post(url, content=b"{not json"), 400),
        (httpx.post(url, json={"model": "nope", "messages": MSG}), 404),
        (httpx.post(url, json={"model": "tracerl-tiny", "messages": [{"role": "wizard", "content": "x"}]}), 400),
        (httpx.post(url, json={"model": "tracerl-tiny", "messages": []}), 400),
        (httpx.post(url, json={"model": "tracerl-tiny", "messages": "hello"}), 400),
        (httpx.post(url, json={"model": "tracerl-tiny", "messages": MSG, "max_tokens": 10**6}), 400),
        (httpx.post(url, json={"model": "tracerl-tiny", "messages": MSG, "temperature": -1}), 400),
        (httpx.post(url, content=b"x" * (33 * 2**20), headers={"content-type": "application/json"}), 413),
        (httpx.post(f"{gateway.url}/v1/completions", json={"model": "tracerl-tiny", "prompt": [10**9]}), 400),
        (httpx.post(f"{gateway.url}/v1/traces", content=b"\x00garbage", headers={"content-type": "application/x-protobuf"}), 400),
    ]
    for response, status in cases:
        assert response.status_code == status, response.text
        assert set(response.json()["error"]) >= {"message", "type"}
    with pytest.raises(NotFoundError):
        OpenAI(base_url=gateway.url + "/v1", api_key="x").chat.completions.create(model="gpt-4o", messages=MSG)
    with pytest.raises(BadRequestError, match="context"):
        OpenAI(base_url=gateway.url + "/v1", api_key="x").chat.completions.create(
            model="tracerl-tiny", messages=MSG, max_tokens=10**6)
    assert httpx.get(f"{gateway.url}/health").json()["status"] == "ok"
    assert store.count() == 0  # nothing was recorded for refused calls


def test_api_key_and_bind_address(tiny_engine, store):
    from tracerl.core.errors import ConfigError

    with pytest.raises(ConfigError, match="without an API key"):
        GatewayServer(tiny_engine, store, host="0.0.0.0")
    with GatewayServer(tiny_engine, store, api_key="s3cret") as gw:
        assert httpx.get(f"{gw.url}/v1/models").status_code == 401
        assert httpx.get(f"{gw.url}/health").status_code == 200
        ok = OpenAI(base_url=gw.url + "/v1", api_key="s3cret").chat.completions.create(
            model="tracerl-tiny", messages=MSG, max_tokens=2)
        assert ok.choices[0].message is not None


def test_otlp_receiver_stores_protobuf_and_json(gateway, store):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{gateway.url}/v1/traces")))
    with provider.get_tracer("remote-agent").start_as_current_span("agent step", attributes={"tracerl.session.id": "remote"}):
        pass
    provider.shutdown()
    assert [r.name for r in store.spans(session_id="remote")] == ["agent step"]
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "json span",
        "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [{"key": "tracerl.session.id", "value": {"stringValue": "remote"}}]}]}]}]}
    assert httpx.post(f"{gateway.url}/v1/traces", json=body).status_code == 200
    assert sorted(r.name for r in store.spans(session_id="remote")) == ["agent step", "json span"]


def test_tool_calls_parsed_and_multi_turn_joins_into_one_sequence(tiny_engine, store):
    def script(prompt: str) -> str:
        if "<|im_start|>tool" in prompt or "tool_response" in prompt:
            return "The answer is 42."
        return '<tool_call>{"name": "calculator", "arguments": {"expression": "12 + 30"}}</tool_call>'

    engine = ScriptedEngine(tiny_engine.tokenizer, script, model_name="tracerl-tiny")
    with GatewayServer(engine, store) as gw:
        client = OpenAI(base_url=gw.session_url("s-tools"), api_key="x")
        messages = list(MSG)
        first = client.chat.completions.create(model="tracerl-tiny", messages=messages, tools=TOOLS)
        call = first.choices[0].message.tool_calls[0]
        assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "calculator"
        assert json.loads(call.function.arguments) == {"expression": "12 + 30"}
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "42"}]
        second = client.chat.completions.create(model="tracerl-tiny", messages=messages, tools=TOOLS)
        assert second.choices[0].message.content == "The answer is 42."
    ep = episode_from_spans(store.spans(session_id="s-tools"))
    (traj,) = ep.trajectories
    assert [s.sequence for s in traj.steps] == [0, 1] and traj.steps[0].metadata["tool_names"] == ["calculator"]
    # token-in/token-out: the second prompt extends the first prompt + response exactly
    assert len(traj.sequences) == 1 and traj.prefix_breaks == 0
    assert sum(traj.sequences[0].mask) == sum(len(s.response_ids) for s in traj.steps)


def test_parse_tool_calls_keeps_malformed_blocks_as_text():
    assert parse_tool_calls("no tools here") == ("no tools here", [])
    content, calls = parse_tool_calls('ok <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>')
    assert content == "ok" and calls[0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    broken = "<tool_call>{not json}</tool_call>"
    assert parse_tool_calls(broken) == (broken, [])


# -- the Responses API (the OpenAI Agents SDK's default), served as a chat call -----------

CALCULATOR = {"type": "function", "name": "calculator", "description": "Evaluate an arithmetic expression.",
              "parameters": TOOLS[0]["function"]["parameters"]}
QUESTION = MSG[0]["content"]


def _in_order(store, session):
    return sorted(_spans(store, session), key=lambda s: s.attributes["tracerl.llm.sequence"])


def test_a_response_is_the_chat_answer_with_the_same_tokens_recorded(gateway, store):
    client = OpenAI(base_url=gateway.session_url("s-1"), api_key="x")
    chat = client.chat.completions.create(model="tracerl-tiny", max_tokens=16, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}])
    resp = client.responses.create(model="tracerl-tiny", instructions="Be brief.", input=QUESTION,
                                   max_output_tokens=16, temperature=0)
    assert resp.output_text == chat.choices[0].message.content
    assert resp.status == ("incomplete" if chat.choices[0].finish_reason == "length" else "completed")
    chat_span, resp_span = _in_order(store, "s-1")
    for key in ("tracerl.llm.prompt_token_ids", "tracerl.llm.response_token_ids", "gen_ai.input.messages"):
        assert resp_span.attributes[key] == chat_span.attributes[key]
    assert resp_span.attributes["gen_ai.response.id"] == resp.id
    assert resp.usage.output_tokens == len(resp_span.attributes["tracerl.llm.response_token_ids"])

    events = list(client.responses.create(model="tracerl-tiny", instructions="Be brief.", input=QUESTION,
                                          max_output_tokens=16, temperature=0, stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == resp.output_text
    assert events[-1].response.output_text == resp.output_text
    assert len(_in_order(store, "s-1")) == 3


def test_function_calls_go_out_as_items_and_come_back_as_tool_messages(tiny_engine, tmp_path):
    def script(prompt: str) -> str:
        if "<|im_start|>tool" in prompt or "tool_response" in prompt:
            return "The answer is 42."
        return '<tool_call>{"name": "calculator", "arguments": {"expression": "12+30"}}</tool_call>'

    with SpanStore(tmp_path / "gw.db") as store, \
            GatewayServer(ScriptedEngine(tiny_engine.tokenizer, script, model_name="tracerl-tiny"), store) as gw:
        client = OpenAI(base_url=gw.session_url("s-2"), api_key="x")
        first = client.responses.create(model="tracerl-tiny", input=QUESTION, tools=[CALCULATOR])
        (call,) = first.output
        assert call.type == "function_call" and call.name == "calculator"
        assert json.loads(call.arguments) == {"expression": "12+30"}
        history = [{"role": "user", "content": QUESTION}, call.model_dump(exclude_none=True),
                   {"type": "function_call_output", "call_id": call.call_id, "output": "42"}]
        second = client.responses.create(model="tracerl-tiny", input=history, tools=[CALCULATOR])
        assert second.output_text == "The answer is 42."
        spans = _in_order(store, "s-2")
    offered = json.loads(spans[0].attributes["gen_ai.tool.definitions"])
    assert [t["function"]["name"] for t in offered] == ["calculator"]
    last_input = json.loads(spans[1].attributes["gen_ai.input.messages"])[-1]
    assert last_input["role"] == "tool" and last_input["parts"][0]["response"] == "42"


def test_what_the_responses_route_does_not_serve_is_a_clear_400(gateway, store):
    client = OpenAI(base_url=gateway.url + "/v1", api_key="x")
    with pytest.raises(BadRequestError, match="whole conversation"):
        client.responses.create(model="tracerl-tiny", input="hi", previous_response_id="resp_1")
    with pytest.raises(BadRequestError, match="only function tools"):
        client.responses.create(model="tracerl-tiny", input="hi", tools=[{"type": "web_search"}])
    url = gateway.url + "/v1/responses"
    for body in ({"model": "tracerl-tiny", "input": 5}, {"model": "tracerl-tiny"}, [1, 2],
                 {"model": "tracerl-tiny", "input": "hi", "max_output_tokens": 0}):
        response = httpx.post(url, json=body)
        assert response.status_code == 400 and "message" in response.json()["error"], response.text
    assert store.count() == 0


def test_a_groups_repeated_prompt_is_rendered_once_with_the_same_tokens(store):
    """GRPO sends one prompt per sample, each in its own session: the template runs once per
    distinct (messages, tools), and every call still gets exactly the template's tokens."""
    from transformers import AutoTokenizer

    from tracerl.models import tiny_model_path

    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    renders = []
    render = tok.apply_chat_template
    tok.apply_chat_template = lambda *a, **k: renders.append(1) or render(*a, **k)
    engine = ScriptedEngine(tok, lambda prompt: "The answer is 42.")
    other = [{"role": "user", "content": "What is 12 + 31?"}]
    with GatewayServer(engine, store, continue_tokens=False) as gw:
        for i in range(4):
            OpenAI(base_url=gw.session_url(f"g-{i}"), api_key="x").chat.completions.create(
                model="scripted", messages=MSG, max_tokens=8)
        calls = [(other, None), (MSG, TOOLS), (MSG, TOOLS)]
        for i, (messages, tools) in enumerate(calls):
            OpenAI(base_url=gw.session_url(f"h-{i}"), api_key="x").chat.completions.create(
                model="scripted", messages=messages, max_tokens=8, **({"tools": tools} if tools else {}))
    assert len(renders) == 3  # MSG, other, MSG with tools: each once
    fresh = [render(m, tools=t, add_generation_prompt=True, tokenize=True, return_dict=False)
             for m, t in [(MSG, None)] * 4 + calls]
    assert engine.prompts == [list(ids) for ids in fresh]
    assert engine.prompts[4] != engine.prompts[0] and engine.prompts[5] != engine.prompts[0]


def test_otlp_bodies_compressed_as_exporters_send_them(tiny_engine, store):
    """The Collector's otlphttp exporter gzips by default, SDK exporters with compression=gzip:
    such spans are stored; a bomb, a broken stream and an unknown encoding get a 4xx JSON."""
    import gzip
    import zlib

    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    with GatewayServer(tiny_engine, store) as gw:
        url = f"{gw.url}/v1/traces"
        for compression in (Compression.Gzip, Compression.Deflate):
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url, compression=compression)))
            with provider.get_tracer("fleet").start_as_current_span(f"{compression.value} step",
                                                                    attributes={"tracerl.session.id": "packed"}):
                pass
            provider.shutdown()
        assert sorted(r.name for r in store.spans(session_id="packed")) == ["deflate step", "gzip step"]
        bomb = gzip.compress(b"\0" * (33 * 2**20))  # 32 KiB on the wire, over the 32 MiB limit inflated
        broken = gzip.compress(b"x" * 1000)[:-20]
        for body, encoding, status, code in [(bomb, "gzip", 413, "body_too_large"),
                                             (broken, "gzip", 400, "invalid_encoding"),
                                             (b"not gzip", "gzip", 400, "invalid_encoding"),
                                             (zlib.compress(b"{}"), "zstd", 415, "unsupported_encoding")]:
            r = httpx.post(url, content=body, headers={"content-encoding": encoding,
                                                       "content-type": "application/x-protobuf"})
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
        assert httpx.get(f"{gw.url}/health").status_code == 200


def _seeded_run(gw, tracing, tag, run_seed, order, delays):
    """One step of G=3 rollouts of two tasks with the trainer's per-rollout seeds, submitted in
    ``order`` with a pause of ``delays[k]`` s before each call of job k; the agent passes no seed.
    Returns {(task, sample): [response ids of each call, in order]}."""
    import time

    import tracerl
    from tracerl.core.types import Task
    from tracerl.trainers.rollouts import rollout_seed, run_rollouts

    @tracerl.rollout
    def two_turns(task, config):
        client = config.openai_client()
        messages = [{"role": "user", "content": task.data["q"]}]
        for _ in range(2):
            time.sleep(delays[task.data["k"]])
            reply = client.chat.completions.create(model=config.model, messages=messages).choices[0].message
            messages += [reply.model_dump(exclude_none=True), {"role": "user", "content": "Are you sure?"}]
        return 0.0

    settings = tracerl.RolloutSettings(gateway_url=gw.url, max_tokens=12, temperature=1.0)
    jobs = [(Task(id=f"t{i}", data={"q": q, "k": 3 * i + g}), f"{tag}-t{i}-g{g}",
             settings.model_copy(update={"seed": rollout_seed(run_seed, 0, i, g) if run_seed is not None else None}))
            for i, q in enumerate(["What is 12 + 30?", "What is 7 - 9?"]) for g in range(3)]
    episodes = run_rollouts(two_turns, [jobs[k] for k in order], tracing=tracing, concurrency=6)
    return {(ep.task.id, ep.id[-2:]): [s.response_ids for s in ep.steps] for ep in episodes}


def test_a_seeded_session_samples_the_same_tokens_whatever_the_thread_timing(tiny_engine, tracing):
    """The trainer's per-rollout seed rides in the session URL; the gateway samples each call
    without a seed of its own from it + the call's sequence number. Two runs of the same seed,
    their calls in other orders (so other batches), sample the same tokens; a group's samples
    differ, and so does another run seed, and so do unseeded runs."""
    from tracerl.trainers.rollouts import rollout_seed

    store = next(iter(tracing.stores.values()))
    with GatewayServer(tiny_engine, store) as gw:
        first = _seeded_run(gw, tracing, "a", 1, list(range(6)), [0.0] * 6)
        again = _seeded_run(gw, tracing, "b", 1, [5, 3, 1, 4, 2, 0], [0.05, 0.0, 0.02, 0.0, 0.04, 0.01])
        other = _seeded_run(gw, tracing, "c", 2, list(range(6)), [0.0] * 6)
        unseeded = [_seeded_run(gw, tracing, tag, None, list(range(6)), [0.0] * 6) for tag in "de"]
        client = OpenAI(base_url=gw.session_url("own-seed", seed=5), api_key="x")
        own = client.chat.completions.create(model="tracerl-tiny", messages=MSG, max_tokens=12, seed=7)
        plain = OpenAI(base_url=gw.session_url("plain"), api_key="x").chat.completions.create(
            model="tracerl-tiny", messages=MSG, max_tokens=12, seed=7)
        bad = httpx.post(f"{gw.url}/sessions/s/seed/x1/v1/chat/completions", json={"model": "tracerl-tiny",
                                                                                    "messages": MSG})
    assert all(len(calls) == 2 and all(calls) for calls in first.values())
    assert first == again
    for t in ("t0", "t1"):  # the group's three samples differ from one another
        assert len({tuple(map(tuple, first[(t, f"g{g}")])) for g in range(3)}) == 3
    assert other != first and unseeded[0] != unseeded[1]
    # what was sampled with is on the span: the session's seed + the sequence number, or the request's own
    spans = sorted(_spans(store, "b-t1-g2"), key=lambda s: s.attributes["tracerl.llm.sequence"])
    assert [json.loads(s.attributes["tracerl.llm.sampling"])["seed"] for s in spans] == [
        rollout_seed(1, 0, 1, 2) + seq for seq in (0, 1)]
    assert "seed" not in json.loads(_spans(store, "d-t0-g0")[0].attributes["tracerl.llm.sampling"])
    assert own.choices[0].message.content == plain.choices[0].message.content
    assert json.loads(_spans(store, "own-seed")[0].attributes["tracerl.llm.sampling"])["seed"] == 7
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "seed"
