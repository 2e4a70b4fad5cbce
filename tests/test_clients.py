"""Rollout clients (tracerl.core.clients through RolloutContext): an episode's client is bound
to its session URL, and every episode shares one TLS context and connection pool, so a client
per episode costs no more than one client (a new TLS context is ~17 ms of CPU)."""

from __future__ import annotations

import asyncio
import importlib.util
import ssl
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
