"""Time-ordered ids: trace ids and episode ids whose leading bits are the creation time.

The span store indexes spans by ``(trace_id, span_id)`` and by session id. With uniformly
random ids every new span lands on a random page of each index, and every page a transaction
touches is written whole to SQLite's write-ahead log: in a store of 50,000 spans that is about
half of a span's storing cost (bench/adapter_parts.py --ids). Ids that begin with the time
land next to each other, at the end of the index, so a batch touches a few pages.

The layout is UUIDv7's (RFC 9562): 48 bits of Unix milliseconds, then random bits. A trace id
keeps 80 random bits, so its rightmost 7 bytes are random as W3C Trace Context level 2
requires of the ``random-trace-id`` flag, and samplers that read the low 64 bits (the SDK's
``TraceIdRatioBased``) see uniform values. Only ids tracerl makes itself are ordered: the
tracer provider tracerl installs when the app has none (unless ``OTEL_PYTHON_ID_GENERATOR``
names a generator), the gateway's traces and episode ids; a user's own provider keeps its
generator (pass ``id_generator=TimeOrderedIdGenerator()`` to give it the same layout).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
import uuid
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

_RANDOM_BITS = 80
_rand = random.getrandbits  # the SDK's RandomIdGenerator draws from the same source


def _unix_ms48() -> int:
    """The leading 48 bits of both kinds of id: Unix milliseconds."""
    return (time.time_ns() // 1_000_000) & 0xFFFF_FFFF_FFFF


def time_ordered_trace_id() -> int:
    """A 128-bit trace id: Unix milliseconds (48 bits), then 80 random bits; never 0."""
    return _unix_ms48() << _RANDOM_BITS | (_rand(_RANDOM_BITS) or 1)


def new_episode_id() -> str:
    """A UUIDv7 in hex (32 characters): unique, and sorted by creation time to the millisecond."""
    value = _unix_ms48() << 80 | 0x7 << 76 | _rand(12) << 64 | 0b10 << 62 | _rand(62)
    return uuid.UUID(int=value).hex


class TimeOrderedIdGenerator(RandomIdGenerator):
    """The SDK's default generator with time-ordered trace ids; span ids stay the SDK's random
    ones (they are unique within a trace, whose spans are stored together)."""

    def generate_trace_id(self) -> int:
        return time_ordered_trace_id()

    def is_trace_id_random(self) -> bool:
        return True  # the rightmost 7 bytes are (W3C level 2's condition for the flag)


def row_id(row: Mapping[Any, Any], asked: Mapping[str, Any], answer: Any) -> str:
    """A data row's stable task id: ``row-`` and a hash of what it asks (``question`` and the
    mapped columns) and its answer, of the whole row when it asks nothing by name. A task set
    from an app's run (``tracerl.set_task({"question": ..., "answer": ...})``) gets the id its
    data row gets, so held-out rows stay held out whichever way the task arrives."""
    key: Any = {"asked": dict(asked), "answer": answer} if asked else row
    return "row-" + hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
