"""UpstreamEngine: our gateway in front of another OpenAI-compatible server (here: a second
gateway serving the tiny model, which speaks vLLM's token-id extras)."""

from __future__ import annotations

import pytest
from openai import OpenAI

from tracerl.core.convert import episode_from_spans
from tracerl.core.store import SpanStore
from tracerl.engines.upstream import UpstreamEngine
from tracerl.gateway import GatewayServer
from tracerl.gateway.server import free_port

MSG = [{"role": "user", "content": "What is 3 + 4?"}]


@pytest.fixture
def upstream(tiny_engine, tmp_path):
    with SpanStore(tmp_path / "upstream.db") as store, GatewayServer(tiny_engine, store) as gw:
        yield gw


def _front(tmp_path, engine):
    return GatewayServer(engine, SpanStore(tmp_path / "front.db"))


def test_token_mode_records_exact_ids_from_the_upstream(upstream, tiny_engine, tmp_path):
    engine = UpstreamEngine(upstream.url + "/v1", "tracerl-tiny", tokenizer=tiny_engine.tokenizer, model_name="policy")
    with _front(tmp_path, engine) as front:
        reply = OpenAI(base_url=front.session_url("ep"), api_key="x").chat.completions.create(
            model="policy", messages=MSG, max_tokens=12, seed=5)
        ep = episode_from_spans(front.store.spans(session_id="ep"))
    (step,) = ep.steps
    assert step.has_tokens and len(step.response_logprobs) == len(step.response_ids)
    assert tiny_engine.tokenizer.decode(step.response_ids, skip_special_tokens=True) == reply.choices[0].message.content
    # the upstream saw the same prompt ids the front templated
    (up_span,) = [s for s in upstream.store.spans() if s.attributes.get("tracerl.source") == "gateway"]
    assert up_span.attributes["tracerl.llm.prompt_token_ids"] == step.prompt_ids


def test_chat_passthrough_keeps_ids_when_the_upstream_returns_them(upstream, tmp_path):
    engine = UpstreamEngine(upstream.url + "/v1", "tracerl-tiny", model_name="hosted")
    with _front(tmp_path, engine) as front:
        client = OpenAI(base_url=front.session_url("ep"), api_key="x")
        reply = client.chat.completions.create(model="hosted", messages=MSG, max_tokens=8)
        assert reply.model == "hosted" and reply.choices[0].logprobs is None
        streamed = list(client.chat.completions.create(model="hosted", messages=MSG, max_tokens=8, stream=True))
        assert streamed[-1].choices[0].finish_reason in ("stop", "length")
        ep = episode_from_spans(front.store.spans(session_id="ep"))
    assert [s.sequence for s in ep.steps] == [0, 1] and all(s.has_tokens for s in ep.steps)

    no_ids = UpstreamEngine(upstream.url + "/v1", "tracerl-tiny", model_name="hosted", request_token_ids=False)
    with _front(tmp_path, no_ids) as front:
        OpenAI(base_url=front.session_url("ep2"), api_key="x").chat.completions.create(
            model="hosted", messages=MSG, max_tokens=8)
        ep = episode_from_spans(front.store.spans(session_id="ep2"))
    assert not ep.steps[0].has_tokens and ep.termination_reason.value == "missing_token_ids"


def test_responses_to_a_hosted_model_are_forwarded_as_chat_and_recorded(upstream, tiny_engine, tmp_path):
    """An Agents SDK agent on its default model, evaluated against a hosted model: the front
    gateway forwards the Responses call as a chat call and records it like one."""
    engine = UpstreamEngine(upstream.url + "/v1", "tracerl-tiny", model_name="hosted")
    with _front(tmp_path, engine) as front:
        client = OpenAI(base_url=front.session_url("ep"), api_key="x")
        reply = client.responses.create(model="hosted", instructions="Be brief.", input=MSG[0]["content"],
                                        max_output_tokens=8, temperature=0)
        events = list(client.responses.create(model="hosted", input=MSG[0]["content"], max_output_tokens=8,
                                              temperature=0, stream=True))
        ep = episode_from_spans(front.store.spans(session_id="ep"))
    assert reply.model == "hosted" and events[-1].type == "response.completed"
    first, second = ep.steps
    assert first.has_tokens and [m.role for m in first.input_messages] == ["system", "user"]
    assert tiny_engine.tokenizer.decode(first.response_ids, skip_special_tokens=True) == reply.output_text
    assert reply.usage.output_tokens == len(first.response_ids)
    assert second.output_message.content == events[-1].response.output_text


def test_upstream_errors_become_client_errors(upstream, tmp_path):
    from openai import NotFoundError

    engine = UpstreamEngine(upstream.url + "/v1", "no-such-model", model_name="hosted")
    with _front(tmp_path, engine) as front, pytest.raises(NotFoundError, match="no-such-model"):
        OpenAI(base_url=front.url + "/v1", api_key="x").chat.completions.create(model="hosted", messages=MSG)


@pytest.mark.slow
@pytest.mark.parametrize("token_mode", [True, False])
def test_gateway_serve_upstream_records_an_apps_traffic_to_its_own_server(upstream, tmp_path, token_mode):
    """``tracerl gateway serve --upstream URL``: an app pointed at tracerl instead of its own
    OpenAI-compatible server gets that server's answers, and every call is recorded for training."""
    import subprocess
    import sys
    import time

    from tracerl.models import tiny_model_path

    port, db = free_port(), tmp_path / "front.db"
    cmd = [sys.executable, "-m", "tracerl", "gateway", "serve", "--upstream", upstream.url + "/v1",
           "--upstream-model", "tracerl-tiny", "--name", "policy", "--port", str(port), "--db", str(db)]
    if token_mode:
        cmd += ["--tokenizer", str(tiny_model_path())]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/sessions/app-1/v1", api_key="x", max_retries=0)
        for _ in range(200):  # until it serves
            try:
                reply = client.chat.completions.create(model="policy", messages=MSG, max_tokens=12)
                break
            except Exception:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                time.sleep(0.1)
        else:
            raise AssertionError("the gateway did not start")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert reply.choices[0].message.content
    with SpanStore(db) as store:
        ep = episode_from_spans(store.spans(session_id="app-1"))
    (step,) = ep.steps
    assert step.output_message.content == reply.choices[0].message.content
    assert step.has_tokens  # token mode templates here; passthrough gets vLLM-style ids back


def test_gateway_serve_upstream_needs_the_upstreams_model_name(capsys):
    from tracerl.cli.main import main

    assert main(["gateway", "serve", "--upstream", "http://127.0.0.1:9/v1", "--port", str(free_port())]) == 1
    assert "--upstream needs --upstream-model" in capsys.readouterr().err
    assert main(["gateway", "serve", "--upstream", "http://127.0.0.1:9/v1", "--model", "x", "--upstream-model", "m",
                 "--port", str(free_port())]) == 1
    assert "not both" in capsys.readouterr().err
