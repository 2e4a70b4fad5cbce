"""Rollout clients (tracerl.core.clients through RolloutContext): an episode's client is bound
to its session URL, and every episode shares one TLS context and connection pool, so a client
per episode costs no more than one client (a new TLS context is ~17 ms of CPU)."""

from __future__ import annotations

import asyncio
import importlib.util
import ssl
import time
from pathlib import Path

import pytest

import tracerl
from tracerl.core import clients
from tracerl.testing import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_pools(monkeypatch):
    """No shared TLS context or pool yet, and a count of every TLS context made after the
    libraries are imported (aiohttp makes two at import, once per process)."""
    import aiohttp  # noqa: F401
    import langchain_openai  # noqa: F401
    import litellm  # noqa: F401
    import openai  # noqa: F401

    monkeypatch.setattr(clients, "_tls", None)
    monkeypatch.setattr(clients, "_sync_http", {})
    monkeypatch.setattr(clients, "_local", type(clients._local)())
    made = []
    original = ssl.SSLContext.__new__

    def counting(cls, *args, **kwargs):
        made.append(cls)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "__new__", counting)
    return made


def _quickstart():
    spec = importlib.util.spec_from_file_location("quickstart", ROOT / "examples" / "quickstart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solve


def test_the_readme_example_makes_one_tls_context_for_200_episodes(tracing, fresh_pools):
    solve = _quickstart()
    with ScriptedServer(lambda messages, tools: "5", tracer_provider=tracing.provider) as server:
        settings = tracerl.RolloutSettings(gateway_url=server.url)
        episodes = [solve({"id": f"t{i}", "data": {"question": "What is 2+3?"}, "answer": 5}, settings,
                          tracing=tracing) for i in range(200)]
        sessions = [r["session"] for r in server.requests]
    assert [ep.reward for ep in episodes] == [1.0] * 200
    assert sessions == [ep.id for ep in episodes]  # each episode reached its own session URL
    assert all(ep.steps and ep.steps[0].has_tokens for ep in episodes)
    assert len(fresh_pools) <= 1, f"{len(fresh_pools)} TLS contexts for 200 episodes"


def test_the_readme_example_is_the_readme_s():
    code = (ROOT / "examples" / "quickstart.py").read_text()
    body = code[code.index("@tracerl.rollout"):code.index('\n\nif __name__')]
    assert body in (ROOT / "README.md").read_text()


def test_async_langchain_and_litellm_clients_share_the_pools(tracing, fresh_pools):
    import litellm

    async def two_episodes(url: str) -> list[str]:
        out = []
        for i in range(2):
            config = _context(url, f"a{i}")
            client = config.async_openai_client()
            reply = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            await client.close()  # an agent closing its client leaves the shared pool open
            out.append(reply.choices[0].message.content)
        return out

    with ScriptedServer(lambda messages, tools: "ok") as server:
        assert asyncio.run(two_episodes(server.url)) == ["ok", "ok"]
        assert asyncio.run(two_episodes(server.url)) == ["ok", "ok"]  # a new loop, a new pool, one TLS
        for i in range(3):
            llm = _context(server.url, f"lc{i}").chat_openai()
            assert llm.invoke("hi").content == "ok"
            reply = litellm.completion(**_context(server.url, f"ll{i}").litellm_kwargs(),
                                       messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content == "ok"
        with _context(server.url, "closed").openai_client() as client:  # closes the client...
            client.models.list()
        after = _context(server.url, "after").openai_client()  # ...not the shared pool
        assert after.chat.completions.create(model="m", messages=[]).choices[0].message.content == "ok"
        sessions = {r.get("session") for r in server.requests}
    assert {"a0", "a1", "lc0", "ll2", "after"} <= sessions
    assert len(fresh_pools) <= 1


def _context(url: str, episode_id: str) -> tracerl.RolloutContext:
    return tracerl.RolloutContext(episode_id=episode_id, task=tracerl.Task(id=episode_id),
                                  base_url=f"{url}/sessions/{episode_id}/v1", model="scripted", api_key="x",
                                  sampling={"temperature": 1.0})


# -- a slow engine is slow, not broken (issue 42) ------------------------------------------


def test_the_read_timeout_follows_the_episodes_timeout_s():
    import httpx

    from tracerl.tasks.agents import chat_client

    unbounded, limited = clients.http_timeout(None), clients.http_timeout(45.0)
    assert (unbounded.read, unbounded.write, unbounded.pool) == (None, None, None)
    assert (limited.read, limited.write, limited.pool) == (45.0, 45.0, 45.0)
    assert unbounded.connect == limited.connect == clients.CONNECT_TIMEOUT_S  # reaching the gateway stays bounded
    assert isinstance(unbounded, httpx.Timeout)
    for timeout_s in (None, 45.0):
        ctx = _context("http://127.0.0.1:9", "t")
        ctx.timeout_s = timeout_s
        for client in (ctx.openai_client(), ctx.async_openai_client(), ctx.anthropic_client(),
                       ctx.async_anthropic_client(), chat_client(ctx)):
            assert (client.timeout.read, client.timeout.connect) == (timeout_s, clients.CONNECT_TIMEOUT_S)
        assert ctx.chat_openai().request_timeout.read == timeout_s
        assert ctx.chat_anthropic().default_request_timeout == timeout_s
    assert _context("http://127.0.0.1:9", "t").openai_client(timeout=3.0).timeout == 3.0  # the agent's own wins


@pytest.mark.parametrize(("settings_s", "decorator_s"), [(None, None), (30.0, None), (None, 20.0), (30.0, 20.0)])
def test_an_episodes_context_carries_its_timeout_s(tracing, settings_s, decorator_s):
    seen = []

    @tracerl.rollout(timeout_s=decorator_s)
    def sync_agent(task, config):
        seen.append(config.timeout_s)

    @tracerl.rollout(timeout_s=decorator_s)
    async def async_agent(task, config):
        seen.append(config.timeout_s)

    settings = tracerl.RolloutSettings(gateway_url="http://127.0.0.1:9", timeout_s=settings_s)
    sync_agent({"id": "s"}, settings, tracing=tracing)
    asyncio.run(async_agent({"id": "a"}, settings, tracing=tracing))
    assert seen == [settings_s or decorator_s] * 2  # the settings' limit, else the decorator's


def test_an_episode_outlasts_a_would_be_fixed_timeout_when_timeout_s_is_unset(tracing, monkeypatch):
    """The engine takes 2 s a reply, twice what a fixed 1 s client timeout (the bound that is
    left, the connect's, patched down to 1 s) would allow: with no timeout_s the episodes of
    the built-in agent and of a RolloutContext helper still succeed."""
    import httpx

    from tracerl import tasks
    from tracerl.tasks.agents import math_agent

    monkeypatch.setattr(clients, "CONNECT_TIMEOUT_S", 1.0)
    task = tasks.get("arithmetic").tasks("test", 1, seed=0)[0]

    def slow(messages, tools):
        time.sleep(2.0)
        return f"The answer is {task.answer}."

    @tracerl.rollout
    def helper_agent(task, config):
        reply = config.openai_client().chat.completions.create(model=config.model, messages=[])
        return 1.0 if reply.choices[0].message.content else 0.0

    with ScriptedServer(slow, tracer_provider=tracing.provider) as server:
        with pytest.raises(httpx.ReadTimeout):  # what a fixed 1 s would have done
            httpx.post(f"{server.url}/v1/chat/completions", json={"messages": []}, timeout=1.0)
        settings = tracerl.RolloutSettings(gateway_url=server.url, model="scripted", api_key="x")
        assert settings.timeout_s is None
        episodes = [math_agent(task, settings, tracing=tracing), helper_agent(task, settings, tracing=tracing)]
    assert [(ep.termination_reason, ep.reward) for ep in episodes] == [(tracerl.TerminationReason.SUCCESS, 1.0)] * 2
