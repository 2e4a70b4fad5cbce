"""Load: 256 concurrent multi-turn sessions through a real gateway socket, no error, no lost span.

The engine is the bundled tiny model behind a TorchEngine (dynamic batching), so requests from
different sessions share forward passes; max_tokens is small to keep the run short. Every
reply the client got must have its span in the store (the gateway writes it before answering).

The engine here runs torch single-threaded: on 2 cores, torch's 2 intra-op (OpenMP) threads
fight the gateway's and the client's threads for the CPU and a batch of this tiny model takes
seconds instead of tens of milliseconds (measured: 5.3 s against 0.05 s for 32 rows).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import httpx
import pytest
from openai import AsyncOpenAI

from tracerl.core.convert import episode_from_spans
from tracerl.core.errors import StoreError
from tracerl.core.spans import SpanRecord
from tracerl.core.store import SpanStore
from tracerl.gateway import GatewayServer
from tracerl.gateway.writer import SpanWriter

SESSIONS, TURNS, MAX_TOKENS = 256, 4, 8


@pytest.fixture
def engine():
    """A TorchEngine of its own whose worker thread does torch work on one thread.

    torch applies its thread count to a thread when that thread first runs a parallel op, so
    the setting is lowered only around the engine's warm-up call and restored for everyone else.
    """
    import torch

    from tracerl.engines.base import SamplingParams
    from tracerl.engines.torch_engine import TorchEngine

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        engine = TorchEngine(batch_window_ms=10)
        engine.generate_sync([1, 2, 3], SamplingParams(max_tokens=2))
    finally:
        torch.set_num_threads(before)
    yield engine
    engine.shutdown()


@pytest.mark.slow
async def test_256_concurrent_sessions_of_4_calls_lose_nothing(engine, tmp_path):
    with SpanStore(tmp_path / "load.db") as store, GatewayServer(engine, store) as gw:
        http = httpx.AsyncClient(limits=httpx.Limits(max_connections=SESSIONS, max_keepalive_connections=SESSIONS),
                                 timeout=120)
        client = AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, http_client=http)
        batches_before = engine.batches

        async def session(i: int) -> list[str]:
            agent = client.with_options(base_url=gw.session_url(f"load-{i}"))
            messages = [{"role": "user", "content": f"What is {i} + {i % 7}?"}]
            ids = []
            for turn in range(TURNS):  # sequential within the session: each turn extends the last
                reply = await agent.chat.completions.create(model="tracerl-tiny", messages=messages,
                                                            max_tokens=MAX_TOKENS, temperature=1.0)
                ids.append(reply.id)
                messages += [{"role": "assistant", "content": reply.choices[0].message.content or ""},
                             {"role": "user", "content": f"And {turn} more?"}]
            return ids

        start = time.monotonic()
        results = await asyncio.gather(*(session(i) for i in range(SESSIONS)), return_exceptions=True)
        elapsed = time.monotonic() - start
        await client.close()

    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == [], f"{len(errors)} sessions failed, first: {errors[:1]!r}"
    replied = {rid for ids in results for rid in ids}  # type: ignore[union-attr]
    assert len(replied) == SESSIONS * TURNS

    with SpanStore(tmp_path / "load.db") as store:  # a fresh connection: what is on disk
        spans = [s for s in store.spans() if s.attributes.get("tracerl.source") == "gateway"]
        assert len(spans) == SESSIONS * TURNS
        assert {s.attributes["gen_ai.response.id"] for s in spans} == replied
        by_session: dict[str, list[int]] = {}
        for s in spans:
            by_session.setdefault(s.attributes["tracerl.session.id"], []).append(s.attributes["tracerl.llm.sequence"])
        assert sorted(by_session) == sorted(f"load-{i}" for i in range(SESSIONS))
        assert all(sorted(seqs) == list(range(TURNS)) for seqs in by_session.values())
        for i in range(SESSIONS):
            episode = episode_from_spans(store.spans(session_id=f"load-{i}"))
            steps = [step for traj in episode.trajectories for step in traj.steps]
            assert [s.sequence for s in steps] == list(range(TURNS))
            assert all(s.prompt_ids and s.response_ids for s in steps)
    # concurrent sessions shared forward passes (33 batches on a quiet machine; under heavy
    # background load sessions drift apart and batches shrink, ~4 calls each at worst seen)
    assert engine.batches - batches_before <= SESSIONS * TURNS / 2
    print(f"{SESSIONS * TURNS} calls in {elapsed:.1f} s, {engine.batches - batches_before} engine batches")


class _SlowFirstCommit(SpanStore):
    """Holds the first transaction for a moment, so the writes behind it queue up."""

    first = True

    def add(self, records: Iterable[SpanRecord]) -> int:
        if self.first:
            self.first = False
            time.sleep(0.2)
        return super().add(records)


async def test_group_commit_shares_transactions_and_a_bad_write_fails_alone(tmp_path):
    trace = "5b8efff798038103d269b633813fc60c"
    good = [[SpanRecord(trace, f"{i + 1:016x}", None, f"span {i}", 1, 2)] for i in range(40)]
    bad = [SpanRecord(trace, "f" * 16, None, "beyond int64", 2**64, 2**64)]
    with _SlowFirstCommit(tmp_path / "w.db") as store:
        writer = SpanWriter(store)
        results = await asyncio.gather(*(writer.write(r) for r in good), return_exceptions=True)
        assert results == [None] * 40 and store.count() == 40
        assert writer.transactions == 2  # the first write alone, the 39 queued behind it in one

        store.first = True
        more = [[SpanRecord(trace, f"{i + 100:016x}", None, f"span {i}", 1, 2)] for i in range(10)]
        results = await asyncio.gather(*(writer.write(r) for r in [*more[:5], bad, *more[5:]]),
                                       return_exceptions=True)
        assert isinstance(results[5], StoreError)
        assert results[:5] + results[6:] == [None] * 10 and store.count() == 50
