"""One normalized span record, whatever the span came from.

Sources: an opentelemetry-sdk ``ReadableSpan`` (in-process exporters), an OTLP/HTTP
``ExportTraceServiceRequest`` body in protobuf or JSON encoding (remote agents, decoded with
opentelemetry-proto), and JSON lines (our export format). All three give equal
:class:`SpanRecord` objects for the same span.

Ids are lowercase hex (32 chars for traces, 16 for spans) as in W3C traceparent; an
all-zero parent id (W3C's "invalid" id, which some SDKs send for a root) means no parent.
Times are integer nanoseconds in ``[0, 2**63)``, what SQLite and Parquet can hold. Attribute
values are str, bool, int, float or lists of them; key-value lists (OTLP ``kvlistValue``, SDK
mapping attributes) become dicts and bytes become base64 text, as OTLP/JSON writes them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from .errors import SpanDecodeError

SESSION_ATTRIBUTES = ("tracerl.session.id", "session.id")
_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
_STATUS = ("UNSET", "OK", "ERROR")
_HEX = frozenset("0123456789abcdef")
_MAX_NS = 2**63 - 1  # SQLite INTEGER and Parquet int64


def session_of(attributes: Mapping[str, Any]) -> str | None:
    """The session id a span's attributes name, if any."""
    for key in SESSION_ATTRIBUTES:
        value = attributes.get(key)
        if value:
            return str(value)
    return None


def service_of(resource: Mapping[str, Any]) -> str | None:
    """The OpenTelemetry ``service.name`` of a span's resource: the app that wrote it."""
    name = resource.get("service.name")
    return str(name) if name is not None and name != "" else None


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """A finished span, independent of where it came from."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    kind: str = "INTERNAL"
    attributes: dict[str, Any] = field(default_factory=dict)
    status_code: str = "UNSET"
    status_message: str | None = None
    events: list[SpanEvent] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str | None = None

    @property
    def session_id(self) -> str | None:
        """The episode this span belongs to, when the span says so itself."""
        return session_of(self.attributes)

    @property
    def service(self) -> str | None:
        """The app that wrote this span: its resource's ``service.name``."""
        return service_of(self.resource)

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "kind": self.kind,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "attributes": self.attributes,
            "status_code": self.status_code,
            "status_message": self.status_message,
            "events": [
                {"name": e.name, "time_ns": e.time_ns, "attributes": e.attributes} for e in self.events
            ],
            "resource": self.resource,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SpanRecord:
        """Build from :meth:`to_dict` output, checking what a hand-edited file may get wrong."""
        try:
            trace_id, span_id = _check_id(d["trace_id"], 32), _check_id(d["span_id"], 16)
            parent = d.get("parent_span_id")
            start_ns = _check_ns(d["start_ns"])
            record = cls(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=_check_parent(parent) if parent else None,
                name=str(d.get("name", "")),
                kind=str(d.get("kind", "INTERNAL")),
                start_ns=start_ns,
                end_ns=_check_ns(d.get("end_ns", start_ns)),
                attributes=dict(d.get("attributes") or {}),
                status_code=str(d.get("status_code", "UNSET")),
                status_message=d.get("status_message"),
                events=[
                    SpanEvent(str(e["name"]), int(e.get("time_ns", 0)), dict(e.get("attributes") or {}))
                    for e in d.get("events") or ()
                ],
                resource=dict(d.get("resource") or {}),
                scope=d.get("scope"),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise SpanDecodeError(
                f"invalid span record ({type(exc).__name__}: {exc}); each record needs hex "
                "trace_id/span_id and integer start_ns, as written by `tracerl traces export`"
            ) from exc
        return record


def _check_id(value: Any, length: int) -> str:
    text = str(value).lower()
    if len(text) != length or not _HEX.issuperset(text) or text.strip("0") == "":
        raise ValueError(f"{value!r} is not a {length}-digit non-zero hex id")
    return text


def _check_parent(value: Any) -> str | None:
    text = str(value)
    return None if text.strip("0") == "" else _check_id(text, 16)


def _check_ns(value: Any) -> int:
    ns = int(value)
    if not 0 <= ns <= _MAX_NS:
        raise ValueError(f"{value!r} is not a time in nanoseconds since the epoch")
    return ns


# --- opentelemetry-sdk ------------------------------------------------------------------


def _plain(value: Any) -> Any:
    # OTel SDK attribute sequences are tuples and may nest (the SDK also takes mappings and
    # bytes); JSON wants lists, dicts and text, and OTLP decoding gives exactly those.
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _plain_dict(attributes: Any) -> dict[str, Any]:
    return {str(k): _plain(v) for k, v in (attributes or {}).items()}


def span_record(span: Any) -> SpanRecord:
    """The record of an opentelemetry-sdk ``ReadableSpan``: what the store keeps of every span
    exported in-process. The one writer of records from SDK spans (the OTLP decoder gives the
    same record for the same span: tested)."""
    ctx = span.get_span_context()
    parent = span.parent
    status = span.status
    scope = span.instrumentation_scope
    start = span.start_time or 0
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        kind=span.kind.name,
        start_ns=start,
        end_ns=span.end_time or start,
        attributes=_plain_dict(span.attributes),
        status_code=status.status_code.name,
        status_message=status.description,
        events=[SpanEvent(e.name, e.timestamp, _plain_dict(e.attributes)) for e in span.events],
        resource=_plain_dict(span.resource.attributes) if span.resource is not None else {},
        scope=scope.name if scope is not None else None,
    )


# --- OTLP ---------------------------------------------------------------------------------


def _any_value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode("ascii")
    return getattr(v, which)


def _attrs(kvs: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in kvs}


def _id_bytes(raw: bytes, length: int, what: str, index: int) -> str:
    if len(raw) != length or not any(raw):
        got = f"{len(raw)} bytes" if len(raw) != length else "all zeros"
        raise SpanDecodeError(
            f"OTLP span #{index}: {what} must be {length} bytes, not all zero (got {got}); "
            "the sender's ids are broken"
        )
    return raw.hex()


def _time_ns(value: int, what: str, index: int) -> int:
    if value > _MAX_NS:
        raise SpanDecodeError(f"OTLP span #{index}: {what} {value} is not a time in nanoseconds since the epoch")
    return value


def _proto_request() -> Any:
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError as exc:  # pragma: no cover - a core dependency
        from .errors import MissingDependencyError

        raise MissingDependencyError("opentelemetry-proto", "otlp", "Decoding OTLP") from exc
    return ExportTraceServiceRequest()


def _hex_ids_to_base64(node: Any) -> None:
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping expects base64. Convert in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"):
                if isinstance(value, str) and value:
                    if len(value) % 2 or not _HEX.issuperset(value.lower()):
                        raise SpanDecodeError(
                            f"OTLP/JSON {key} {value[:40]!r} is not hex; OTLP/JSON writes ids as "
                            "hex strings (32 digits for traceId, 16 for spanId), not base64"
                        )
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            elif isinstance(value, (dict, list)):
                _hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)


def decode_otlp(
    body: bytes | bytearray | memoryview | str, content_type: str = "application/x-protobuf"
) -> list[SpanRecord]:
    """Decode an OTLP/HTTP ``ExportTraceServiceRequest`` body (protobuf or JSON) into records.

    Raises :class:`SpanDecodeError` naming the problem for a body that is not a valid request
    or holds a span with invalid ids or times; nothing is half-decoded.
    """
    request = _proto_request()
    if "json" in content_type.lower():
        _parse_json_request(body, request)
    else:
        from google.protobuf.message import DecodeError

        data = body.encode() if isinstance(body, str) else bytes(body)
        try:
            request.ParseFromString(data)
        except (DecodeError, ValueError, RecursionError) as exc:
            raise SpanDecodeError(
                f"OTLP protobuf body could not be decoded ({exc}); send an "
                "ExportTraceServiceRequest, or JSON with Content-Type: application/json"
            ) from exc
    return list(_records_from_request(request))


def _parse_json_request(body: bytes | bytearray | memoryview | str, request: Any) -> None:
    from google.protobuf import json_format

    try:
        payload = json.loads(body if isinstance(body, (str, bytes, bytearray)) else bytes(body))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise SpanDecodeError(f"OTLP/JSON body is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise SpanDecodeError(
            f"OTLP/JSON body must be an object with 'resourceSpans', not a {type(payload).__name__}"
        )
    try:
        _hex_ids_to_base64(payload)
        json_format.ParseDict(payload, request, ignore_unknown_fields=True)
    # protobuf lets a few conversions escape as built-in errors: Infinity or NaN where an
    # integer or enum belongs (OverflowError, ValueError), odd types (TypeError)
    except (json_format.ParseError, RecursionError, SystemError, UnicodeError, OverflowError, ValueError,
            TypeError) as exc:
        raise SpanDecodeError(f"OTLP/JSON body does not match ExportTraceServiceRequest: {exc}") from exc


def _records_from_request(request: Any) -> Iterator[SpanRecord]:
    index = 0
    for resource_spans in request.resource_spans:
        resource = _attrs(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name or None
            for s in scope_spans.spans:
                parent = s.parent_span_id
                start_ns = _time_ns(s.start_time_unix_nano, "startTimeUnixNano", index)
                yield SpanRecord(
                    trace_id=_id_bytes(s.trace_id, 16, "traceId", index),
                    span_id=_id_bytes(s.span_id, 8, "spanId", index),
                    # Empty or all-zero: a root span (the Collector reads both that way).
                    parent_span_id=_id_bytes(parent, 8, "parentSpanId", index) if any(parent) else None,
                    name=s.name,
                    kind=_KINDS[s.kind] if 0 <= s.kind < len(_KINDS) else "INTERNAL",
                    start_ns=start_ns,
                    end_ns=_time_ns(s.end_time_unix_nano, "endTimeUnixNano", index) or start_ns,
                    attributes=_attrs(s.attributes),
                    status_code=_STATUS[s.status.code] if 0 <= s.status.code < 3 else "UNSET",
                    status_message=s.status.message or None,
                    events=[
                        SpanEvent(e.name, _time_ns(e.time_unix_nano, "event timeUnixNano", index), _attrs(e.attributes))
                        for e in s.events
                    ],
                    resource=resource,
                    scope=scope,
                )
                index += 1


# --- JSON lines -------------------------------------------------------------------------


def dumps_jsonl(records: Iterable[SpanRecord]) -> Iterator[str]:
    """One compact JSON document per record, newline-terminated."""
    for r in records:
        yield json.dumps(r.to_dict(), separators=(",", ":"), allow_nan=True) + "\n"


def read_jsonl(lines: Iterable[str] | IO[str]) -> Iterator[SpanRecord]:
    """Parse span records from JSON lines; blank lines are skipped, errors name the line."""
    for lineno, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise SpanDecodeError(f"line {lineno}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise SpanDecodeError(f"line {lineno}: expected a JSON object per line")
        try:
            yield SpanRecord.from_dict(data)
        except SpanDecodeError as exc:
            raise SpanDecodeError(f"line {lineno}: {exc}") from exc


def to_records(spans: Sequence[Any]) -> list[SpanRecord]:
    """Accept SpanRecords, SDK ReadableSpans or dicts; return SpanRecords."""
    out: list[SpanRecord] = []
    for s in spans:
        if isinstance(s, SpanRecord):
            out.append(s)
        elif isinstance(s, Mapping):
            out.append(SpanRecord.from_dict(s))
        else:
            out.append(span_record(s))
    return out
