"""What the span store's write cost owes to its ids (a lab tool: tracerl.core.ids's reason).

Spans are written in batches (one SQLite commit each) into a store that already holds many
spans, with uniformly random trace and session ids (the SDK's default, uuid4 episode ids)
against time-ordered ones (tracerl.core.ids). Result: docs/performance.md.

    python bench/lab/store_ids.py [--prefill 50000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any


def store_ids(prefill: int = 50_000, batch: int = 150, rounds: int = 8, per_round: int = 10) -> None:
    """What the ids cost the store: spans written in batches of ``batch`` (one SQLite commit
    each) into a store already holding ``prefill`` spans, with uniformly random trace and
    session ids (the SDK's default, uuid4 episode ids) against time-ordered ones
    (tracerl.core.ids). Each case has a store of its own; rounds alternate the cases, so
    machine noise hits both alike. Chat spans of 700 characters of messages, 3 per trace and
    session, as an episode of three LLM calls; and 1 per trace without a session, as a lone
    call. CPU us per span (user + system: a commit writes every index page it touched)."""
    import random
    import resource
    import uuid

    from tracerl.core.ids import new_episode_id, time_ordered_trace_id
    from tracerl.core.spans import SpanRecord
    from tracerl.core.store import SpanStore

    makers = {"random": (lambda: f"{random.getrandbits(128):032x}", lambda: uuid.uuid4().hex),
              "time-ordered": (lambda: f"{time_ordered_trace_id():032x}", new_episode_id)}

    def records(n: int, ids: tuple[Callable[[], str], Callable[[], str]], per_trace: int,
                sessions: bool) -> list[Any]:
        out = []
        for i in range(n):
            if i % per_trace == 0:
                trace_id, session = ids[0](), ids[1]()
            now = time.time_ns()
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": "x" * 600,
                     "gen_ai.output.messages": "y" * 100, "gen_ai.usage.input_tokens": 9}
            if sessions:
                attrs["tracerl.session.id"] = session
            out.append(SpanRecord(trace_id=trace_id, span_id=f"{random.getrandbits(64):016x}", parent_span_id=None,
                                  name="chat m", kind="CLIENT", start_ns=now, end_ns=now, attributes=attrs,
                                  scope="bench"))
        return out

    print(f"store writes: {batch} spans per commit into a store of {prefill:,}+ spans, {rounds} rounds x "
          f"{per_round} commits; CPU us per span (median of rounds)")
    for per_trace, sessions in ((3, True), (1, False)):
        stores = {}
        for name, ids in makers.items():
            stores[name] = store = SpanStore(os.path.join(tempfile.mkdtemp(), "ids.db"))
            for _ in range(0, prefill, 1000):
                store.add(records(1000, ids, per_trace, sessions))
        cpu: dict[str, list[float]] = {name: [] for name in makers}
        for r in range(rounds):
            for name in (list(makers) if r % 2 == 0 else list(makers)[::-1]):
                batches = [records(batch, makers[name], per_trace, sessions) for _ in range(per_round)]
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                for b in batches:
                    stores[name].add(b)
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                spent = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
                cpu[name].append(spent / (batch * per_round) * 1e6)
        label = f"{per_trace} span{'s' if per_trace > 1 else ''} per trace, {'in sessions' if sessions else 'no session'}"
        print(f"  {label:32}" + "".join(f"  {name} {statistics.median(v):5.1f}" for name, v in cpu.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", type=int, default=50_000, help="spans in the store before timing")
    store_ids(parser.parse_args().prefill)
