"""Test helpers: a scripted OpenAI-compatible server that records spans like the gateway.

:class:`ScriptedServer` answers ``POST /v1/chat/completions`` and ``/v1/responses`` (and the
same under ``/sessions/{id}/v1``) from a Python function instead of a model. It tokenizes with a
byte-level ChatML tokenizer (:class:`ByteTokenizer`) and, per call, emits the same
token-level ``tracerl.*`` span the real gateway emits: prompt and response ids, logprobs, a
per-session sequence number, the session from the URL path or W3C baggage, as a child of
the caller's ``traceparent``. Use it to test agents and instrumentation without a model; it
uses only the standard library and binds 127.0.0.1.

    with ScriptedServer(lambda messages, tools: "42") as server:
        client = OpenAI(base_url=server.url + "/sessions/ep-1/v1", api_key="x")
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from opentelemetry import baggage, trace
from opentelemetry.propagate import extract

from .core import semconv as sc
from .core.types import Message, ToolCall

IM_START, IM_END = 256, 257
Reply = str | dict[str, Any]
Script = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Reply]


class ByteTokenizer:
    """UTF-8 bytes are ids 0-255; ``<|im_start|>``=256, ``<|im_end|>``=257. ChatML template.

    Rendering is deterministic, so a later prompt extends an earlier prompt + response
    exactly (token-in/token-out holds, as with a real chat template).
    """

    specials = {"<|im_start|>": IM_START, "<|im_end|>": IM_END}

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        out, buf = [], bytearray()
        for i in ids:
            if i < 256:
                buf.append(i)
                continue
            out.append(buf.decode("utf-8", "replace"))
            buf = bytearray()
            out.append("<|im_start|>" if i == IM_START else "<|im_end|>")
        out.append(buf.decode("utf-8", "replace"))
        return "".join(out)

    @staticmethod
    def assistant_text(content: str | None, tool_calls: list[dict[str, Any]]) -> str:
        text = content or ""
        for tc in tool_calls:
            fn = tc.get("function", tc)
            args = fn.get("arguments", "{}")
            args = json.loads(args) if isinstance(args, str) and args else args
            text += "<tool_call>" + json.dumps({"name": fn.get("name"), "arguments": args}) + "</tool_call>"
        return text

    def render(self, messages: list[dict[str, Any]]) -> list[int]:
        ids: list[int] = []
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if m.get("role") == "assistant":
                content = self.assistant_text(content, m.get("tool_calls") or [])
            ids += [IM_START, *self.encode(f"{m.get('role')}\n{content or ''}"), IM_END, *self.encode("\n")]
        return ids + [IM_START, *self.encode("assistant\n")]


class ScriptedServer:
    """Start with ``with ScriptedServer(script) as s:`` (or ``start()``/``stop()``)."""

    def __init__(
        self,
        script: Script,
        *,
        tracer_provider: Any | None = None,
        model: str = "scripted",
        host: str = "127.0.0.1",
        port: int = 0,
        emit_spans: bool = True,
    ):
        self.script = script
        self.model = model
        self.tokenizer = ByteTokenizer()
        self.emit_spans = emit_spans
        self._provider = tracer_provider
        self._sequence: dict[str, int] = {}
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def session_url(self, session_id: str) -> str:
        return f"{self.url}/sessions/{session_id}/v1"

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the call --------------------------------------------------------------------

    def complete(self, body: dict[str, Any], session: str | None, headers: dict[str, str]) -> dict[str, Any]:
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        reply = self.script(messages, tools)
        if isinstance(reply, str):
            reply = {"content": reply}
        content = reply.get("content")
        tool_calls = [
            {"id": tc.get("id") or f"call_{uuid.uuid4().hex[:8]}", "type": "function",
             "function": {"name": tc["name"], "arguments": json.dumps(tc.get("arguments", {}))}}
            for tc in reply.get("tool_calls", [])
        ]
        prompt_ids = self.tokenizer.render(messages)
        response_ids = [*self.tokenizer.encode(self.tokenizer.assistant_text(content, tool_calls)), IM_END]
        # A made-up but deterministic distribution: each token had probability 1/2.
        logprobs = [-math.log(2.0)] * len(response_ids)
        finish = "tool_calls" if tool_calls else "stop"
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        if session is None:
            found = baggage.get_baggage(sc.BAGGAGE_SESSION_KEY, extract(headers))
            session = str(found) if found else None
        with self._lock:
            key = session or "unassigned"
            seq = self._sequence.get(key, 0)
            self._sequence[key] = seq + 1
            self.requests.append({"session": session, "body": body, "headers": headers})
        if self.emit_spans:
            self._emit(body, session, headers, prompt_ids, response_ids, logprobs, content, tool_calls, finish, rid, seq)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(response_ids),
                      "total_tokens": len(prompt_ids) + len(response_ids)},
            "prompt_token_ids": prompt_ids,
        }

    def respond(self, body: dict[str, Any], session: str | None, headers: dict[str, str]) -> dict[str, Any]:
        """``POST /v1/responses`` (the Responses API): the same script and recorded span, in
        that API's shapes, translated as the gateway translates them."""
        # imported here, not with this module: the gateway package loads its server
        from .gateway import responses as rs

        doc = self.complete(rs.chat_request(body), session, headers)
        choice = doc["choices"][0]
        return rs.response(doc["id"], doc["model"], choice["message"], doc["usage"], body, choice["finish_reason"])

    def _emit(self, body, session, headers, prompt_ids, response_ids, logprobs, content, tool_calls, finish, rid, seq):  # noqa: ANN001
        ctx = extract(headers)
        session = session or baggage.get_baggage(sc.BAGGAGE_SESSION_KEY, ctx)
        out = Message(role="assistant", content=content, tool_calls=[
            ToolCall(id=tc["id"], name=tc["function"]["name"], arguments=tc["function"]["arguments"]) for tc in tool_calls
        ])
        inputs = [Message.model_validate(_plain_message(m)) for m in body.get("messages") or []]
        attrs: dict[str, Any] = {
            sc.SPAN_TYPE: "llm",
            sc.SOURCE: "gateway",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "tracerl",
            "gen_ai.request.model": body.get("model", self.model),
            "gen_ai.response.model": self.model,
            "gen_ai.response.id": rid,
            "gen_ai.response.finish_reasons": [finish],
            "gen_ai.usage.input_tokens": len(prompt_ids),
            "gen_ai.usage.output_tokens": len(response_ids),
            "gen_ai.input.messages": sc.genai_message_json(inputs),
            "gen_ai.output.messages": sc.genai_message_json([out]),
            sc.PROMPT_IDS: prompt_ids,
            sc.RESPONSE_IDS: response_ids,
            sc.RESPONSE_LOGPROBS: logprobs,
            sc.SEQUENCE: seq,
            sc.WEIGHT_VERSION: 0,
        }
        if session:
            attrs[sc.SESSION_ID] = session
        provider = self._provider or trace.get_tracer_provider()
        tracer = provider.get_tracer("tracerl.testing")
        with tracer.start_as_current_span(
            f"chat {self.model}", context=ctx, kind=trace.SpanKind.SERVER, attributes=attrs
        ):
            pass

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up: its timeout
                    self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/").endswith("/v1/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?")[0]
                session = None
                if path.startswith("/sessions/"):
                    session, _, path = path[len("/sessions/"):].partition("/")
                    if path.startswith("seed/"):  # a seeded session's URL: a script draws no samples
                        path = path.partition("/")[2].partition("/")[2]
                    path = "/" + path
                answer = {"/v1/chat/completions": server.complete, "/v1/responses": server.respond}.get(path)
                if answer is None:
                    self._send(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                    doc = answer(body, session, {k.lower(): v for k, v in self.headers.items()})
                except Exception as exc:  # noqa: BLE001 - a test server reports, never dies
                    self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
                    return
                if not body.get("stream"):
                    self._send(200, doc)
                elif answer == server.respond:  # bound methods: equal, never identical
                    from .gateway.responses import sse_events

                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for event in sse_events(doc):
                        self.wfile.write(event)
                else:
                    self._stream(doc, body)

            def _stream(self, doc: dict[str, Any], body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                choice = doc["choices"][0]
                msg = choice["message"]
                delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
                if msg.get("tool_calls"):
                    delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(msg["tool_calls"])]
                chunks = [
                    {"index": 0, "delta": delta, "finish_reason": None},
                    {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]},
                ]
                for c in chunks:
                    event = {"id": doc["id"], "object": "chat.completion.chunk", "created": doc["created"],
                             "model": doc["model"], "choices": [c]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                if (body.get("stream_options") or {}).get("include_usage"):
                    event = {"id": doc["id"], "object": "chat.completion.chunk", "created": doc["created"],
                             "model": doc["model"], "choices": [], "usage": doc["usage"]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

        return Handler


def _plain_message(m: dict[str, Any]) -> dict[str, Any]:
    content = m.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = [
        {"id": tc.get("id"), "name": tc.get("function", {}).get("name", ""),
         "arguments": tc.get("function", {}).get("arguments", "{}")}
        for tc in m.get("tool_calls") or []
    ]
    return {"role": m.get("role", "user"), "content": content, "name": m.get("name"),
            "tool_calls": calls, "tool_call_id": m.get("tool_call_id")}


def calculator_script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """A math-agent script: ask the calculator tool (when offered) for ``a op b``, then answer."""
    import re

    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return f"The answer is {str(last.get('content', '')).strip()}."
    text = str(last.get("content") or "")
    match = re.search(r"(-?\d+)\s*([-+*])\s*(-?\d+)", text)
    if match is None:
        return "I do not know."
    expr = "".join(match.groups())
    if tools:
        return {"content": None, "tool_calls": [{"name": "calculator", "arguments": {"expression": expr}}]}
    a, op, b = int(match[1]), match[2], int(match[3])
    return f"The answer is {a + b if op == '+' else a - b if op == '-' else a * b}."


class ScriptedEngine:
    """An :class:`~tracerl.engines.base.Engine` that answers from a script, for testing agents
    through the real gateway (templating, tool-call parsing, spans) without a trained model.

    ``script(prompt_text) -> reply text``; the reply is tokenized with ``tokenizer`` (any HF
    tokenizer, e.g. the bundled tiny model's) and ends with its EOS token.
    """

    def __init__(self, tokenizer: Any, script: Callable[[str], str], *, model_name: str = "scripted",
                 max_context: int = 4096, logprob: float = -0.25):
        self._tokenizer = tokenizer
        self.script = script
        self.model_name = model_name
        self.weight_version = 0
        self._max_context = max_context
        self.logprob = logprob
        self.prompts: list[list[int]] = []

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def max_context(self) -> int:
        return self._max_context

    async def generate(self, prompt_ids: list[int], params: Any) -> list[Any]:
        from .engines.base import Generation

        self.prompts.append(list(prompt_ids))
        text = self.script(self._tokenizer.decode(prompt_ids, skip_special_tokens=False))
        hits = sorted((text.index(s) + len(s), s) for s in params.stop if s in text)
        if hits:  # a stop string ends the reply after it, as an engine's stop check does
            text, stop_reason = text[: hits[0][0]], hits[0][1]
            ids = list(self._tokenizer.encode(text, add_special_tokens=False))
        else:
            ids = [*self._tokenizer.encode(text, add_special_tokens=False), self._tokenizer.eos_token_id]
            stop_reason = self._tokenizer.eos_token_id
        full, ids = ids, ids[: params.max_tokens]
        finish: Literal["stop", "length"] = "stop" if len(ids) == len(full) else "length"
        return [Generation(list(ids), [self.logprob] * len(ids), finish, self.weight_version,
                           stop_reason if finish == "stop" else None)
                for _ in range(params.n)]

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self.weight_version = version

    async def close(self) -> None:
        pass
