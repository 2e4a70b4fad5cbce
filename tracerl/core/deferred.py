"""Deferred spans: the OpenTelemetry SDK's span work done in batches, off the agent's thread.

An adapter's callbacks run inside the framework, between two stretches of its own work, on
cold CPU caches: the SDK's ``start_span`` costs ~27 us there against ~8 in a loop
(bench/instrument_overhead.py --account). A :class:`DeferredTracer` does at the call only
what must happen then: the sampling decision and the ids, so the span context exists for
children and for the ``traceparent`` sent to the gateway. Its :class:`DeferredSpan` records
what the caller does to it (attributes, events, status, exceptions, name, end time, each
with its own timestamp). Ended spans are replayed in batches by a :class:`SpanWorker`:

* through the real SDK tracer, with the live call's ids and sampling result: every processor
  sees an ordinary SDK span (``on_start`` in the context it started in, attached, then
  ``on_end``) with the timestamps, limits and attributes a live span would have had;
* or, when the provider holds tracerl's processors and nothing else (the default), straight
  into the store as the very record the SDK path writes (tested equal).

What differs from live spans: processors see a span when it has ended, up to five seconds
later (OpenTelemetry's own ``BatchSpanProcessor`` waits as long by default), on the worker's
thread. Every flush
(``Tracing.flush``, an episode ending, the provider's ``force_flush`` and ``shutdown`` through
:class:`~.otel.SessionSpanProcessor`, interpreter exit) replays what is pending first. Only
tracerl's own spans are deferred (:meth:`~.otel.Tracing.tracer`; ``TRACERL_LIVE_SPANS=1``
turns it off); every other tracer is untouched.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import copy
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.sampling import Decision, SamplingResult
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from . import semconv as sc
from .ids import ids_for

log = logging.getLogger(__name__)

_RANDOM_FLAG = getattr(TraceFlags, "RANDOM_TRACE_ID", 0)  # W3C level 2, newer SDKs only


class DeferredTracer(trace.Tracer):
    """A tracer whose spans reach the SDK's processors when they end, replayed in batches.

    ``tracing`` is what :func:`~.otel.setup_tracing` attached to the provider; the spans are
    replayed through its SDK tracer ``name``, and its provider's sampler and id generator
    decide here, at the call, exactly as the SDK would."""

    def __init__(self, tracing: Any, name: str, worker: SpanWorker | None = None):
        self.tracing = tracing
        self.name = name
        self.sdk_tracer = tracing.provider.get_tracer(name)
        self._provider = tracing.provider
        self._worker = worker or default_worker()
        # time-ordered trace ids unless the provider was given a generator (see ids.py)
        self._ids = ids_for(tracing.provider.id_generator)
        self._enabled = getattr(self.sdk_tracer, "_is_enabled", None)  # the tracer configurator's switch
        self._default_sampler = _is_default_sampler(tracing.provider.sampler)

    def start_span(self, name: str, context: otel_context.Context | None = None,
                   kind: SpanKind = SpanKind.INTERNAL, attributes: Mapping[str, Any] | None = None,
                   links: Sequence[trace.Link] | None = (), start_time: int | None = None,
                   record_exception: bool = True, set_status_on_exception: bool = True) -> trace.Span:
        start = start_time or time.time_ns()
        if context is None:
            context = otel_context.get_current()
        parent: SpanContext | None = trace.get_current_span(context).get_span_context()
        if self._enabled is not None and not self._enabled():
            return NonRecordingSpan(parent)  # type: ignore[arg-type]
        ids = self._ids
        links = links or ()
        if parent.is_valid:  # type: ignore[union-attr]
            trace_id = parent.trace_id  # type: ignore[union-attr]
            flags = parent.trace_flags & _RANDOM_FLAG  # type: ignore[union-attr]
        else:
            parent = None
            trace_id = ids.generate_trace_id()
            flags = _RANDOM_FLAG if _RANDOM_FLAG and ids.is_trace_id_random() else 0
        if self._default_sampler:  # ParentBased(ALWAYS_ON), decided here without its objects
            decision = Decision.RECORD_AND_SAMPLE if parent is None or parent.trace_flags.sampled else Decision.DROP
            trace_state = parent.trace_state if parent is not None else None
        else:
            result = self._provider.sampler.should_sample(context, trace_id, name, kind, attributes, links)
            decision, attributes, trace_state = result.decision, result.attributes, result.trace_state
        if decision.is_sampled():
            flags |= TraceFlags.SAMPLED
        span_context = SpanContext(trace_id, ids.generate_span_id(), is_remote=False, trace_flags=TraceFlags(flags),
                                   trace_state=trace_state)
        if not decision.is_recording():
            return NonRecordingSpan(span_context)
        return DeferredSpan(self, name, span_context, parent, context, kind, decision, attributes, links, start,
                            (record_exception, set_status_on_exception))

    @contextlib.contextmanager
    def start_as_current_span(self, name: str, context: otel_context.Context | None = None,
                              kind: SpanKind = SpanKind.INTERNAL, attributes: Mapping[str, Any] | None = None,
                              links: Sequence[trace.Link] | None = (), start_time: int | None = None,
                              record_exception: bool = True, set_status_on_exception: bool = True,
                              end_on_exit: bool = True) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time, record_exception,
                               set_status_on_exception)
        with trace.use_span(span, end_on_exit=end_on_exit, record_exception=record_exception,
                            set_status_on_exception=set_status_on_exception) as current:
            yield current


def _is_default_sampler(sampler: Any) -> bool:
    """The SDK's default, ``ParentBased(ALWAYS_ON)``: sampled unless the parent is not."""
    return (type(sampler) is sampling.ParentBased and getattr(sampler, "_root", None) is sampling.ALWAYS_ON
            and getattr(sampler, "_remote_parent_sampled", None) is sampling.ALWAYS_ON
            and getattr(sampler, "_local_parent_sampled", None) is sampling.ALWAYS_ON
            and getattr(sampler, "_remote_parent_not_sampled", None) is sampling.ALWAYS_OFF
            and getattr(sampler, "_local_parent_not_sampled", None) is sampling.ALWAYS_OFF)


class DeferredSpan(trace.Span):
    """A recording span whose SDK counterpart is built when it ends. Thread-safe enough for
    what spans see in practice: one owner sets attributes, anyone may end it once."""

    __slots__ = ("_tracer", "_name", "_context", "_parent", "_parent_context", "_kind", "_decision", "_attrs",
                 "_links", "_start", "_on_exception", "_late", "_ops", "_end")

    def __init__(self, tracer: DeferredTracer, name: str, span_context: SpanContext, parent: SpanContext | None,
                 parent_context: Any, kind: SpanKind, decision: Decision, attributes: Mapping[str, Any] | None,
                 links: Sequence[trace.Link], start: int, on_exception: tuple[bool, bool]):
        self._tracer = tracer
        self._name = name
        self._context = span_context
        self._parent = parent
        self._parent_context = parent_context
        self._kind = kind
        self._decision = decision
        self._attrs = attributes  # the start attributes (the caller's mapping, as the SDK sampler keeps it)
        self._links = links
        self._start = start
        self._on_exception = on_exception  # (record_exception, set_status_on_exception)
        self._late: dict[str, Any] = {}  # attributes set after the start
        self._ops: list[tuple[Any, ...]] | None = None  # events, status, exceptions, names: in order
        self._end: int | None = None

    # -- what readers of a live span use -------------------------------------------------

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self._end is None

    @property
    def name(self) -> str:
        return self._name

    @property
    def attributes(self) -> Mapping[str, Any]:
        return {**(self._attrs or {}), **self._late}

    # -- recorded, replayed on the SDK span -----------------------------------------------

    def set_attribute(self, key: str, value: Any) -> None:
        if self._end is None:
            # a list the caller may reuse is copied now, as the SDK would
            self._late[key] = tuple(value) if type(value) is list else value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self._end is None:
            late = self._late
            for key, value in attributes.items():
                late[key] = tuple(value) if type(value) is list else value

    def _op(self, *op: Any) -> None:
        if self._end is None:
            if self._ops is None:
                self._ops = []
            self._ops.append(op)

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None,
                  timestamp: int | None = None) -> None:
        self._op("add_event", name, dict(attributes) if attributes else None, timestamp or time.time_ns())

    def add_link(self, context: SpanContext, attributes: Mapping[str, Any] | None = None) -> None:
        self._op("add_link", context, dict(attributes) if attributes else None)

    def update_name(self, name: str) -> None:
        self._op("update_name", name)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        self._op("set_status", status, description)

    def record_exception(self, exception: BaseException, attributes: Mapping[str, Any] | None = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        self._op("record_exception", exception, dict(attributes) if attributes else None,
                 timestamp or time.time_ns(), escaped)

    def end(self, end_time: int | None = None) -> None:
        if self._end is not None:
            return
        self._end = end_time or time.time_ns()
        self._tracer._worker.put(self)

    def __repr__(self) -> str:
        return f"DeferredSpan(name={self._name!r}, context={self._context!r}, ended={self._end is not None})"


class _Preset:
    """The id generator and sampler a replay tracer uses: what the live call already chose."""

    def __init__(self, ids: Any):
        self._ids = ids
        self.trace_id = self.span_id = 0
        self.result: Any = None

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id

    def is_trace_id_random(self) -> bool:
        return self._ids.is_trace_id_random()

    def should_sample(self, *args: Any, **kwargs: Any) -> Any:
        return self.result

    def get_description(self) -> str:
        return "tracerl.deferred"


class SpanWorker:
    """Replays ended :class:`DeferredSpan` objects: every ``interval_s``, when ``batch`` are
    waiting, and on :meth:`drain` (flushes, exit). Each replay is one SQLite transaction
    per store, whose commit costs as much as storing ~20 spans, and each wakes on cold
    caches after the agent's wait: five seconds between replays (OpenTelemetry's default
    batch delay) spread that thin (against one second, ~10 us less per LLM call after
    30 ms idle waits, bench/instrument_overhead.py --server scripted-30ms). Whoever needs
    the spans sooner (an episode ending, ``Tracing.flush``) flushes."""

    def __init__(self, interval_s: float = 5.0, batch: int = 512):
        self.interval_s = interval_s
        self.batch = batch
        self._queue: collections.deque[DeferredSpan] = collections.deque()
        # one replay at a time, so spans reach processors in end order; re-entrant for a
        # processor that flushes the provider from its on_end
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0  # spans that could not be replayed or stored (logged)
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (ref() or (lambda: None))())

    def _after_fork(self) -> None:
        # The parent's pending spans are the parent's to replay; a lock another thread held
        # at the fork would never be released here.
        self._queue.clear()
        self._lock = threading.RLock()
        self._thread = None

    def put(self, span: DeferredSpan) -> None:
        self._queue.append(span)
        if self._thread is None:
            self._start_thread()
        if len(self._queue) >= self.batch:
            self._wake.set()

    def pending(self) -> int:
        return len(self._queue)

    def _start_thread(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="tracerl-span-replay", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval_s)
            self._wake.clear()
            try:
                self.drain()
            except Exception:  # the thread outlives any bug: spans would pile up until a flush
                log.exception("tracerl: replaying deferred spans failed")

    def drain(self) -> int:
        """Replay every span ended so far; returns how many. Safe from any thread."""
        with self._lock:
            queue = self._queue
            spans = [queue.popleft() for _ in range(len(queue))]
            if not spans:
                return 0
            replay = _Replay()
            for span in spans:
                try:
                    replay.add(span)
                except Exception:  # a processor's bug must not stop the other spans
                    self.failures += 1
                    log.exception("tracerl: replaying span %r failed", span._name)
            try:
                replay.write()
            except Exception:
                self.failures += 1
                log.exception("tracerl: storing %d spans failed", len(spans))
            return len(spans)


class _Replay:
    """One drain's spans on their way out. A tracer whose provider holds tracerl's own
    processors and nothing else (the default set-up) gets its spans' store records built
    here, one SQLite transaction per drain: exactly what ``SessionSpanProcessor`` and the
    store's ``BatchSpanProcessor`` would make of the SDK span (tested equal), for a fraction
    of the CPU. Any other set-up, and any span the SDK must shape (events, exceptions, links,
    values it would clean or limit), goes through the SDK."""

    def __init__(self) -> None:
        self._direct: dict[int, Any] = {}  # id(tracer) -> (stores, resource dict, limit) or None
        self._sdk: dict[int, tuple[Any, _Preset]] = {}
        self._rows: dict[int, tuple[list[Any], list[dict[str, Any]]]] = {}

    def add(self, span: DeferredSpan) -> None:
        owner = span._tracer
        key = id(owner)
        if key not in self._direct:
            self._direct[key] = _direct_sink(owner)
        sink = self._direct[key]
        record = _record(span, sink[1], sink[2]) if sink is not None else None
        if record is None:
            self._replay(span)
            return
        self._rows.setdefault(key, (sink[0], []))[1].append(record)

    def write(self) -> None:
        for stores, records in self._rows.values():
            for store in stores:
                store.add_dicts(records, finite=True)  # _record sent anything non-finite to the SDK

    def _replay(self, span: DeferredSpan) -> None:
        """Through the SDK: ``start_span`` with the live call's ids and sampling result, in the
        context it started in (attached, for processors that read the current one), then what
        was done to it, then ``end``."""
        owner = span._tracer
        found = self._sdk.get(id(owner))
        if found is None:
            # A copy of the SDK tracer (the provider caches one per scope, which others may
            # use) that decides nothing itself: ids and sampling come from the live call.
            tracer = copy.copy(owner.sdk_tracer)
            preset = _Preset(owner._ids)
            tracer.id_generator = tracer.sampler = preset
            found = self._sdk[id(owner)] = (tracer, preset)
        tracer, preset = found
        preset.trace_id, preset.span_id = span._context.trace_id, span._context.span_id
        preset.result = SamplingResult(span._decision, span._attrs, span._context.trace_state)
        token = otel_context.attach(span._parent_context)
        try:
            sdk_span = tracer.start_span(span._name, context=span._parent_context, kind=span._kind,
                                         attributes=span._attrs, links=span._links,
                                         start_time=span._start, record_exception=span._on_exception[0],
                                         set_status_on_exception=span._on_exception[1])
        finally:
            otel_context.detach(token)
        if span._late:
            sdk_span.set_attributes(span._late)
        for op in span._ops or ():
            getattr(sdk_span, op[0])(*op[1:])
        sdk_span.end(end_time=span._end)


def _direct_sink(owner: DeferredTracer) -> tuple[list[Any], dict[str, Any], int] | None:
    """(stores, resource dict, attribute limit) when ``owner``'s spans may be stored directly."""
    stores = owner.tracing.direct_stores()
    limits = getattr(owner.sdk_tracer, "_span_limits", None)
    if (not stores or limits is None or limits.max_attribute_length is not None
            or limits.max_span_attribute_length is not None
            or os.environ.get("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "").lower() == "true"):
        return None
    from ._json import _finite
    from .spans import _resource_dict

    resource = _resource_dict(owner.sdk_tracer.resource)
    if not _finite(resource):  # a NaN in the resource: the SDK path writes it exactly
        return None
    return stores, resource, limits.max_span_attributes or 0


_SCALAR_TYPES = (str, bool, int, float)
_SDK = object()  # a value the SDK would clean: the span goes through it


def _plain_value(value: Any) -> Any:
    """The value as the store keeps it, or ``_SDK`` when the SDK would clean it (drop a
    None, a mapping, a mixed sequence, with a warning) or it is not finite (NaN, infinity:
    the SDK path's export writes them as literals; records built here are written without
    looking for them)."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else _SDK
    if kind in _SCALAR_TYPES:
        return value
    if (kind is tuple or kind is list) and value and type(value[0]) in _SCALAR_TYPES and all(type(v) is type(value[0]) for v in value):
        if type(value[0]) is float and not math.isfinite(sum(value)):  # inf/NaN anywhere (or an overflow: rare)
            return _SDK
        return list(value)
    return _SDK


def _copy_plain(source: Mapping[str, Any], into: dict[str, Any]) -> bool:
    """Copy ``source`` into ``into`` as the store keeps each value; False (``into`` partly
    filled) when a value must take the SDK's path."""
    for key, value in source.items():
        if type(value) is not str and type(value) is not int:  # most are: kept as they are
            value = _plain_value(value)
            if value is _SDK:
                return False
        into[key] = value
    return True


def _record(span: DeferredSpan, resource: dict[str, Any], max_attributes: int) -> dict[str, Any] | None:
    """The store record the SDK path would give ``span`` (``spans.readable_span_dict`` of the
    SDK span), or None when it holds something only the SDK shapes."""
    from . import otel  # imports this module

    name, status = span._name, _UNSET
    for op in span._ops or ():
        if op[0] == "update_name":
            name = op[1]
        elif op[0] == "set_status":
            status = _status_after(status, op[1], op[2])
        else:  # events, links, exceptions
            return None
    if span._links:
        return None
    attributes: dict[str, Any] = {}
    if not _copy_plain(span._attrs or {}, attributes):
        return None
    sid = otel.session_to_stamp(attributes, span._parent_context)
    if sid:
        attributes[sc.SESSION_ID] = sid
    if not _copy_plain(span._late, attributes):  # set after the start: they win, as on an SDK span
        return None
    if max_attributes and len(attributes) > max_attributes:
        return None
    parent = span._parent
    return {
        "trace_id": format(span._context.trace_id, "032x"),
        "span_id": format(span._context.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": name,
        "kind": span._kind._name_,
        "start_ns": span._start,
        "end_ns": span._end,
        "attributes": attributes,
        "status_code": status.status_code._name_,
        "status_message": status.description,
        "events": [],
        "resource": resource,
        "scope": span._tracer.name,
    }


_UNSET = Status(StatusCode.UNSET)


def _status_after(current: Status, status: Status | StatusCode, description: str | None) -> Status:
    """The SDK's ``set_status`` rules: OK is final, UNSET changes nothing."""
    if current.status_code is StatusCode.OK:
        return current
    if isinstance(status, Status):
        return current if status.status_code is StatusCode.UNSET else status
    return current if status is StatusCode.UNSET else Status(status, description)


_default: SpanWorker | None = None
_default_lock = threading.Lock()


def default_worker() -> SpanWorker:
    """The process's worker, drained at exit before the SDK's own exit-time shutdown (atexit
    runs the last registered first, and this registers after the SDK provider exists)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SpanWorker()
            atexit.register(_default.drain)
        return _default


def drain() -> int:
    """Replay every deferred span ended so far, on this thread; returns how many."""
    return _default.drain() if _default is not None else 0
