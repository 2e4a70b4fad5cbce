"""Span records: the same span decodes to the same record from every source; bad input says why."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from otlp_receiver import OTLPReceiver

from tracerl.core.errors import SpanDecodeError
from tracerl.core.spans import SpanRecord, decode_otlp, dumps_jsonl, read_jsonl, span_record

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as r:
        yield r


def _make_spans() -> list[Any]:
    """Spans with every attribute type, events, an error status, resource attrs and a parent."""
    exporter = InMemorySpanExporter()
    resource = Resource.create({"service.name": "agent-under-test", "host.cores": 2, "ratio": 0.5, "ci": True})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.spans")
    attrs = {
        "tracerl.session.id": "ep-1",
        "s": "héllo \n \"quoted\"",
        "i": -(2**62),
        "f": 3.25,
        "b": False,
        "strs": ("a", "", "ü"),
        "ints": (1, -2, 2**40),
        "floats": (0.5, -1e-9, 1e300),
        "bools": (True, False, True),
        "empty": (),
    }
    with tracer.start_as_current_span("episode", kind=trace.SpanKind.SERVER, attributes=attrs) as root:
        root.add_event("started", {"step": 0, "tags": ("x", "y")})
        with tracer.start_as_current_span("chat tiny", kind=trace.SpanKind.CLIENT) as child:
            child.set_attribute("gen_ai.operation.name", "chat")
            child.set_attribute("tracerl.llm.prompt_token_ids", list(range(300)))
            child.add_event("retry", {"attempt": 2, "delay_s": 0.25})
            child.set_status(Status(StatusCode.ERROR, "upstream said 503"))
        with tracer.start_as_current_span("tool", kind=trace.SpanKind.PRODUCER) as tool:
            tool.set_attribute("payload", b"\x00\xffbytes")
            tool.set_status(Status(StatusCode.OK))
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    assert len(spans) == 3
    return spans


def _by_id(records: list[SpanRecord]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in sorted(records, key=lambda r: r.span_id)]


def _hex_ids(node: Any) -> Any:
    """protobuf's JSON mapping writes bytes as base64; OTLP/JSON wants ids as hex."""
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else _hex_ids(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def _otlp_json(request_bytes: bytes) -> bytes:
    request = ExportTraceServiceRequest()
    request.ParseFromString(request_bytes)
    # The spec: enums as integers, ids as hex, lowerCamelCase keys.
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    return json.dumps(_hex_ids(doc)).encode()


# --- one span, three sources ------------------------------------------------------------


def test_official_exporter_protobuf_json_and_sdk_give_identical_records(receiver: OTLPReceiver) -> None:
    spans = _make_spans()
    exporter = OTLPSpanExporter(endpoint=receiver.url, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert len(receiver.bodies) == 1
    content_type, body = receiver.bodies[0]
    assert content_type == "application/x-protobuf"

    from_sdk = _by_id([span_record(s) for s in spans])
    from_proto = _by_id(decode_otlp(body, content_type))
    from_json = _by_id(decode_otlp(_otlp_json(body), "application/json"))
    assert from_proto == from_sdk
    assert from_json == from_sdk

    episode, chat, tool = (next(r for r in from_sdk if r["name"] == n) for n in ("episode", "chat tiny", "tool"))
    assert chat["parent_span_id"] == episode["span_id"] == tool["parent_span_id"]
    assert episode["parent_span_id"] is None
    assert episode["attributes"]["ints"] == [1, -2, 2**40]
    assert episode["attributes"]["bools"] == [True, False, True]
    assert episode["events"][0]["attributes"] == {"step": 0, "tags": ["x", "y"]}
    assert (chat["status_code"], chat["status_message"], chat["kind"]) == ("ERROR", "upstream said 503", "CLIENT")
    assert tool["attributes"]["payload"] == base64.b64encode(b"\x00\xffbytes").decode()
    assert episode["resource"]["service.name"] == "agent-under-test"
    assert episode["resource"]["host.cores"] == 2
    assert episode["scope"] == "tests.spans"


def test_json_accepts_snake_case_fields_and_charset_content_type() -> None:
    doc = {"resource_spans": [{"scope_spans": [{"scope": {"name": "s"}, "spans": [
        {"trace_id": TRACE.upper(), "span_id": SPAN, "name": "x", "kind": 3,
         "start_time_unix_nano": "1700000000000000000", "end_time_unix_nano": 1700000000000000500}
    ]}]}]}
    [record] = decode_otlp(json.dumps(doc), "application/json; charset=utf-8")
    assert (record.trace_id, record.span_id, record.kind, record.scope) == (TRACE, SPAN, "CLIENT", "s")
    assert (record.start_ns, record.end_ns) == (1700000000000000000, 1700000000000000500)


def test_all_zero_parent_id_means_root() -> None:
    request = _request(Span(trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(SPAN), parent_span_id=bytes(8)))
    assert decode_otlp(request.SerializeToString())[0].parent_span_id is None
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": TRACE, "spanId": SPAN, "parentSpanId": "0" * 16}]}]}]}
    assert decode_otlp(json.dumps(doc), "application/json")[0].parent_span_id is None


def test_jsonl_round_trip_is_exact() -> None:
    records = [span_record(s) for s in _make_spans()]
    records.append(SpanRecord(TRACE, SPAN, None, "nested", 5, 7, attributes={"kv": {"a": [1, {"b": None}]}}))
    lines = list(dumps_jsonl(records))
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    back = list(read_jsonl(["\n", *lines, "   \n"]))
    assert [r.to_dict() for r in back] == [r.to_dict() for r in records]
    assert [r.session_id for r in back if r.name == "episode"] == ["ep-1"]


# --- bad input ------------------------------------------------------------------------


def _request(*spans: Span) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])])


def _json_span(**fields: Any) -> str:
    span = {"traceId": TRACE, "spanId": SPAN, "name": "x", **fields}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


_T, _S = bytes.fromhex(TRACE), bytes.fromhex(SPAN)


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b"\x0a\x05abc", "application/x-protobuf", "protobuf body could not be decoded"),
        (b"\xff\xff\xff", "application/x-protobuf", "protobuf body could not be decoded"),
        (b"{not json", "application/json", "not valid JSON"),
        (b"\xff\xfe\xfd", "application/json", "not valid JSON"),
        (b"[" * 50_000, "application/json", "not valid JSON"),
        (b"[]", "application/json", "must be an object with 'resourceSpans', not a list"),
        (b'"resourceSpans"', "application/json", "must be an object"),
        (b'{"resourceSpans": 5}', "application/json", "does not match ExportTraceServiceRequest"),
        (b'{"resourceSpans": [{"scopeSpans": {"spans": []}}]}', "application/json", "does not match"),
        (_json_span(startTimeUnixNano="soon").encode(), "application/json", "does not match"),
        (_request(Span(trace_id=_T, span_id=bytes(8))).SerializeToString(), "", "spanId must be 8 bytes, not all zero (got all zeros)"),
        (_request(Span(trace_id=bytes(16), span_id=_S)).SerializeToString(), "", "traceId must be 16 bytes"),
        (_request(Span(trace_id=_T, span_id=b"\x01\x02")).SerializeToString(), "", "(got 2 bytes)"),
        (_request(Span(trace_id=_T[:8], span_id=_S)).SerializeToString(), "", "traceId"),
        (_request(Span(trace_id=_T, span_id=_S, parent_span_id=b"\x01")).SerializeToString(), "", "parentSpanId"),
        (_request(Span(trace_id=_T)).SerializeToString(), "", "spanId"),
        (_request(Span(trace_id=_T, span_id=_S, start_time_unix_nano=2**64 - 1)).SerializeToString(), "", "startTimeUnixNano"),
        (_json_span(spanId="0" * 16).encode(), "application/json", "not all zero"),
        (_json_span(spanId="abc").encode(), "application/json", "is not hex"),
        (_json_span(traceId="zz" * 16).encode(), "application/json", "is not hex"),
        (_json_span(spanId=base64.b64encode(_S).decode()).encode(), "application/json", "not base64"),
        (_json_span(spanId=SPAN[:8]).encode(), "application/json", "(got 4 bytes)"),
        (_json_span(traceId=12).encode(), "application/json", "does not match"),
    ],
    ids=["truncated-proto", "garbage-proto", "invalid-json", "invalid-utf8-json", "deep-json",
         "json-list", "json-string", "json-wrong-type", "json-wrong-nesting", "json-bad-time",
         "zero-span-id", "zero-trace-id", "short-span-id", "short-trace-id", "short-parent-id",
         "missing-span-id", "time-past-int64", "json-zero-span-id", "json-odd-hex",
         "json-non-hex", "json-base64-id", "json-short-id", "json-number-id"],
)
def test_bad_bodies_raise_span_decode_error_saying_why(body: bytes, content_type: str, expected: str) -> None:
    with pytest.raises(SpanDecodeError) as info:
        decode_otlp(body, content_type or "application/x-protobuf")
    assert expected in str(info.value)


def test_one_bad_span_rejects_the_whole_request() -> None:
    request = _request(Span(trace_id=_T, span_id=_S), Span(trace_id=_T, span_id=bytes(8)))
    with pytest.raises(SpanDecodeError, match="span #1"):
        decode_otlp(request.SerializeToString())


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{oops", "line 2: not valid JSON"),
        ("[1, 2]", "line 2: expected a JSON object"),
        (json.dumps({"trace_id": TRACE}), "line 2: invalid span record"),
        (json.dumps({"trace_id": TRACE, "span_id": SPAN, "start_ns": float("inf")}), "line 2: invalid span record"),
        (json.dumps({"trace_id": TRACE, "span_id": SPAN, "start_ns": -1}), "line 2"),
        (json.dumps({"trace_id": TRACE, "span_id": "0" * 16, "start_ns": 1}), "non-zero hex id"),
        (json.dumps({"trace_id": TRACE, "span_id": SPAN, "start_ns": 1, "events": ["x"]}), "line 2"),
    ],
)
def test_bad_jsonl_lines_name_the_line(line: str, expected: str) -> None:
    good = next(dumps_jsonl([SpanRecord(TRACE, SPAN, None, "ok", 1, 2)]))
    with pytest.raises(SpanDecodeError) as info:
        list(read_jsonl([good, line, good]))
    assert expected in str(info.value)


# --- fuzzing: decode_otlp returns records or raises SpanDecodeError, nothing else ------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
_span_fields = ("traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano",
                "endTimeUnixNano", "attributes", "events", "status", "links")
_id_like = st.sampled_from([TRACE, SPAN, "", "0" * 16, "0" * 32, "xyz", TRACE.upper()]) | st.text(max_size=34)
_structured = st.fixed_dictionaries(
    {},
    optional={f: (_id_like if f.endswith("Id") else _json_values) for f in _span_fields},
).map(lambda span: {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span]}]}]})
_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decodes_or_says_why(body: Any, content_type: str) -> None:
    try:
        records = decode_otlp(body, content_type)
    except SpanDecodeError as exc:
        assert str(exc)
    else:
        assert all(isinstance(r, SpanRecord) for r in records)


@_FUZZ
@given(st.binary(max_size=300), st.sampled_from(["application/x-protobuf", "application/json"]))
def test_fuzz_random_bytes(body: bytes, content_type: str) -> None:
    _decodes_or_says_why(body, content_type)


@_FUZZ
@given(_json_values)
def test_fuzz_random_json(doc: Any) -> None:
    _decodes_or_says_why(json.dumps(doc), "application/json")


@_FUZZ
@given(_structured)
@example({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [{"kind": math.inf}]}]}]})  # found by CI
@example({"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": math.nan, "kind": -math.inf}]}]}]})
def test_fuzz_json_shaped_like_a_request(doc: Any) -> None:
    _decodes_or_says_why(json.dumps(doc), "application/json")


@_FUZZ
@given(st.binary(max_size=200))
def test_fuzz_mutated_protobuf(noise: bytes) -> None:
    valid = _request(Span(trace_id=_T, span_id=_S, name="x", start_time_unix_nano=5)).SerializeToString()
    cut = len(noise) % (len(valid) + 1)
    _decodes_or_says_why(valid[:cut] + noise + valid[cut:], "application/x-protobuf")


@_FUZZ
@given(st.dictionaries(st.sampled_from(["trace_id", "span_id", "parent_span_id", "start_ns", "end_ns",
                                        "attributes", "events", "name"]), _json_values | _id_like))
def test_fuzz_jsonl_records(doc: dict[str, Any]) -> None:
    try:
        records = list(read_jsonl([json.dumps(doc)]))
    except SpanDecodeError as exc:
        assert str(exc).startswith("line 1")
    else:
        assert len(records) == 1
