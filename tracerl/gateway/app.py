"""The gateway: an OpenAI-compatible server that records the token truth of every call.

Routes (each also under ``/sessions/{session_id}`` and ``/sessions/{session_id}/seed/{seed}``, see
:func:`session_seed`): ``POST /v1/chat/completions``
(streaming or not), ``POST /v1/responses`` (the Responses API, served as a chat call:
:mod:`.responses`), ``POST /v1/completions``, ``GET /v1/models``; plus ``GET /health`` and
``POST /v1/traces`` (OTLP/HTTP, protobuf or JSON) so remote agents need one address.

Per generated choice the gateway writes one span to the span store *before* answering, so a
client that got its answer can rely on the span being there: the request messages, tools and
sampling parameters, the exact prompt and response token ids, per-token logprobs, finish
reason, a per-session sequence number and the weight version. The span is a child of the
caller's W3C ``traceparent`` when there is one. The session comes from the URL path, else the
``tracerl.session_id`` baggage entry, else the caller's trace, else "unassigned".
"""

from __future__ import annotations

import hmac
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from opentelemetry import baggage, trace
from opentelemetry.propagate import extract
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from tracerl.core import semconv as sc
from tracerl.core.errors import SpanDecodeError, StoreError
from tracerl.core.spans import SpanRecord, decode_otlp
from tracerl.core.store import SpanStore
from tracerl.engines.base import Engine, Generation, tokenizer_fingerprint

from . import admin
from . import messages as ms
from . import protocol as p
from . import responses as rs
from .health import StoreProbe
from .http import json_response, read_json
from .recording import CallRecord, gateway_span, new_ids
from .streaming import sse_chat
from .turns import Turns
from .writer import SpanWriter

log = logging.getLogger(__name__)
UNASSIGNED = "unassigned"


MAX_BODY_BYTES = 32 * 2**20  # a request body's largest size, on the wire and inflated


class _Guard:
    """ASGI middleware: API key check, and bodies over ``limit`` bytes refused with 413
    without reading them whole. Plain ASGI: Starlette's ``BaseHTTPMiddleware`` costs a task
    and a memory stream per request."""

    def __init__(self, app: Any, limit: int, api_key: str | None):
        self.app, self.calls_limit = app, limit
        self.auth = f"Bearer {api_key}".encode() if api_key is not None else None

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, auth = None, b""
        for name, value in scope.get("headers") or ():
            if name == b"content-length":
                declared = value
            elif name == b"authorization" or (name == b"x-api-key" and not auth):  # the anthropic SDK's header
                auth = value if name == b"authorization" else b"Bearer " + value
        path = scope.get("path", "")
        limit = admin.MAX_WEIGHTS_BYTES if path == admin.PATH else self.calls_limit
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_error(send, p.APIError(413, f"request body over {limit} bytes", code="body_too_large"), path)
            return
        if self.auth is not None and not hmac.compare_digest(auth, self.auth) and path != "/health":
            await _send_error(send, p.APIError(401, "missing or wrong API key: send 'Authorization: Bearer <key>' "
                                               "or 'x-api-key: <key>'", type="authentication_error",
                                               code="invalid_api_key"), path)
            return
        seen = 0

        async def limited() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise p.APIError(413, f"request body over {limit} bytes", code="body_too_large")
            return message

        await self.app(scope, limited, send)


def error_body(err: p.APIError, path: str) -> dict[str, Any]:
    """``err`` in the shape of the API at ``path``: Anthropic's on the Messages routes, else OpenAI's."""
    return ms.error_body(err) if ms.is_messages_path(path) else err.body()


async def _send_error(send: Any, err: p.APIError, path: str) -> None:
    body = json.dumps(error_body(err, path)).encode()
    await send({"type": "http.response.start", "status": err.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class Gateway:
    """The state behind the routes: engine, store (through a group-commit writer), sequence numbers."""

    def __init__(self, engine: Engine, store: SpanStore, *, model_aliases: tuple[str, ...] = (),
                 continue_tokens: bool = True, max_body_bytes: int = MAX_BODY_BYTES):
        self.engine, self.store = engine, store
        self.writer = SpanWriter(store)
        self.models = {engine.model_name, *model_aliases}
        self._sequence: dict[str, int] = {}
        tok = getattr(engine, "tokenizer", None)  # None: a passthrough upstream, whose ids are not ours to name
        self.tokenizer_fingerprint = tokenizer_fingerprint(tok) if tok is not None else None
        # a session's next prompt continues the tokens of its last call (see .turns)
        self.turns = Turns(tok) if continue_tokens and tok is not None else None
        self.prompts = PromptCache()
        self.max_body_bytes = max_body_bytes  # a body's largest size, inflated too

    # -- helpers ----------------------------------------------------------------------

    def check_model(self, model: str) -> None:
        if model not in self.models:
            raise p.APIError(404, f"model {model!r} is not served here; available: {sorted(self.models)}",
                             param="model", code="model_not_found")

    def session_of(self, path_session: str | None, headers: dict[str, str]) -> tuple[str | None, str, str | None]:
        """(session id or None, trace id, parent span id or None) for one call."""
        ctx = extract(headers)
        parent = trace.get_current_span(ctx).get_span_context()
        session = path_session or baggage.get_baggage(sc.BAGGAGE_SESSION_KEY, ctx)
        trace_id, span_parent = new_ids()[0], None
        if parent.is_valid:
            trace_id, span_parent = format(parent.trace_id, "032x"), format(parent.span_id, "016x")
        elif session is None:
            session = UNASSIGNED
        return (str(session) if session is not None else None), trace_id, span_parent

    def next_sequence(self, key: str, count: int = 1) -> int:
        """The first of ``count`` consecutive sequence numbers of session ``key``."""
        seq = self._sequence.get(key, 0)
        self._sequence[key] = seq + count
        return seq

    def max_tokens(self, prompt_len: int, requested: int | None) -> int:
        room = self.engine.max_context - prompt_len
        if room < 1:
            raise p.APIError(400, f"the prompt has {prompt_len} tokens; this model's context holds "
                                  f"{self.engine.max_context}", param="messages", code="context_length_exceeded")
        if requested is not None and requested > room:
            raise p.APIError(400, f"max_tokens={requested} plus the {prompt_len}-token prompt exceeds the "
                                  f"context of {self.engine.max_context}; ask for at most {room}",
                             param="max_tokens", code="context_length_exceeded")
        return requested or room

    async def record(self, records: list[SpanRecord]) -> None:
        """Store ``records``; returns once they are committed (the contract: span before answer)."""
        await self.writer.write(records)

    async def run_and_record(
        self, request: Request, path_session: str | None, req: p.ChatRequest | p.CompletionRequest,
        prompt_ids: list[int], shape: Callable[[Generation, int], tuple[dict[str, Any], dict[str, Any]]],
        who: tuple[str | None, str, str | None] | None = None,
    ) -> tuple[str, list[Generation], list[dict[str, Any]], dict[str, int]]:
        """Generate, shape each choice, write one span per choice; return (id, gens, choices, usage).

        ``shape(gen, index)`` returns (the response choice, the assistant message recorded);
        ``who``: what :meth:`session_of` said of this request, when the caller asked already.
        """
        session, trace_id, parent = who or self.session_of(path_session, dict(request.headers))
        params = req.sampling(self.max_tokens(len(prompt_ids), req.requested_max_tokens))
        base = session_seed(request)
        # The call's sequence numbers (one per choice) are taken as it arrives, not when it
        # ends: a seeded session's call samples from seed + its number, which must be known
        # before generating (an engine error leaves those numbers unused, a gap in the order).
        first = self.next_sequence(session or f"trace:{trace_id}", req.n)
        if params.seed is None and base is not None:  # the request's own seed wins
            params = replace(params, seed=base + first)  # choice i: seed + i, its own number (TorchEngine)
        start = time.time_ns()
        gens = await self.engine.generate(prompt_ids, params)
        end = time.time_ns()
        rid = p.completion_id("chatcmpl" if isinstance(req, p.ChatRequest) else "cmpl")
        shaped = [shape(g, i) for i, g in enumerate(gens)]
        await self.record([
            gateway_span(CallRecord(
                session=session, trace_id=trace_id, parent_span_id=parent, sequence=first + i,
                request=req, prompt_ids=prompt_ids, generation=g, message=message,
                finish_reason=choice["finish_reason"], response_id=rid, model=self.engine.model_name,
                start_ns=start, end_ns=end, stream=req.stream, tokenizer=self.tokenizer_fingerprint,
                seed=params.seed,
            ))
            for i, (g, (choice, message)) in enumerate(zip(gens, shaped))
        ])
        completion = sum(len(g.token_ids) for g in gens)
        usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": completion,
                 "total_tokens": len(prompt_ids) + completion}
        return rid, gens, [c for c, _ in shaped], usage

    def text_of(self, gen: Generation) -> str:
        """The returned text: special tokens dropped, cut before a stop string (ids keep it)."""
        text = self.engine.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        if isinstance(gen.stop_reason, str) and gen.stop_reason in text:
            text = text[: text.index(gen.stop_reason)]
        return text

    # -- chat -------------------------------------------------------------------------

    async def chat_call(self, request: Request, path_session: str | None, req: p.ChatRequest
                        ) -> tuple[str, list[Generation], list[dict[str, Any]], dict[str, int], list[int]]:
        """One chat call on the engine, recorded: its prompt (continuing the session's tokens where
        its last call comes back unchanged, see :mod:`.turns`), the generation, its span; returns
        (id, generations, choices, usage, prompt ids)."""
        who = self.session_of(path_session, dict(request.headers))
        session = None if who[0] == UNASSIGNED else who[0]
        messages = p.template_messages(req.messages)
        continued = self.turns.prompt(session, messages, req.tools) if self.turns is not None else None
        prompt_ids = continued if continued is not None else self.chat_prompt(messages, req.tools)
        rid, gens, choices, usage = await self.run_and_record(
            request, path_session, req, prompt_ids, lambda g, i: self.choice(g, i, req), who)
        if self.turns is not None and len(gens) == 1:
            self.turns.remember(session, messages, req.tools, prompt_ids, gens[0].token_ids, choices[0]["message"])
        return rid, gens, choices, usage, prompt_ids

    def chat_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        key = self.prompts.key(messages, tools)
        cached = self.prompts.get(key)
        if cached is not None:
            return cached
        ids = self.render(messages, tools)
        self.prompts.put(key, ids)
        return ids

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        try:
            ids = self.engine.tokenizer.apply_chat_template(
                messages, tools=tools or None, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        except Exception as exc:  # a template error is the request's fault (bad roles/order)
            raise p.APIError(400, f"the chat template rejected these messages: {exc}", param="messages") from exc
        return list(ids)

    def choice(self, gen: Generation, index: int, req: p.ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        text = self.text_of(gen)
        content, calls = p.parse_tool_calls(text) if req.tools else (text, [])
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else gen.finish_reason
        choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
        if req.logprobs:
            choice["logprobs"] = {"content": self.token_logprobs(gen)}
        if req.return_token_ids:
            choice["token_ids"] = gen.token_ids
        return choice, message

    def token_logprobs(self, gen: Generation) -> list[dict[str, Any]]:
        tok = self.engine.tokenizer
        out = []
        for tid, lp in zip(gen.token_ids, gen.logprobs):
            piece = tok.decode([tid], skip_special_tokens=False)
            out.append({"token": piece, "logprob": lp, "bytes": list(piece.encode()), "top_logprobs": []})
        return out

    async def chat(self, request: Request, path_session: str | None) -> Response:
        body = await read_json(request)
        req = p.ChatRequest.model_validate(body)
        self.check_model(req.model)
        if getattr(self.engine, "passthrough", False):
            return await self.chat_passthrough(request, path_session, req, body)
        rid, gens, choices, usage, prompt_ids = await self.chat_call(request, path_session, req)
        doc: dict[str, Any] = {"id": rid, "object": "chat.completion", "created": p.now(),
                               "model": self.engine.model_name, "choices": choices, "usage": usage}
        if req.return_token_ids:
            doc["prompt_token_ids"] = prompt_ids
        if req.stream:
            return StreamingResponse(sse_chat(doc, gens, self.engine.tokenizer, req), media_type="text/event-stream")
        return json_response(doc)

    async def chat_passthrough(self, request: Request, path_session: str | None, req: p.ChatRequest,
                               body: dict[str, Any]) -> Response:
        """Forward to an upstream chat API; record the token ids it returns, if any."""
        doc, gens = await self.forward(request, path_session, req, body)
        for choice in doc.get("choices", []):  # hide the extras we asked for ourselves
            if not req.return_token_ids:
                choice.pop("token_ids", None)
            if not req.logprobs:
                choice["logprobs"] = None
        if not req.return_token_ids:
            doc.pop("prompt_token_ids", None)
        if req.stream:
            doc.setdefault("created", p.now())
            return StreamingResponse(sse_chat(doc, gens, None, req), media_type="text/event-stream")
        return json_response(doc)

    async def forward(self, request: Request, path_session: str | None, req: p.ChatRequest,
                      body: dict[str, Any]) -> tuple[dict[str, Any], list[Generation | None]]:
        """One chat call through the upstream engine, recorded: (its answer, per choice the
        generation when the upstream returned token ids)."""
        session, trace_id, parent = self.session_of(path_session, dict(request.headers))
        start = time.time_ns()
        try:
            doc = await self.engine.chat(body)  # type: ignore[attr-defined]
        except Exception as exc:
            status = getattr(exc, "status", 502)
            raise p.APIError(status if 400 <= status < 600 else 502, str(exc), type="upstream_error") from exc
        end = time.time_ns()
        prompt_ids = doc.get("prompt_token_ids")
        records, gens = [], []
        for choice in doc.get("choices", []):
            ids = choice.get("token_ids")
            lps = [t.get("logprob") for t in ((choice.get("logprobs") or {}).get("content") or [])]
            gen = Generation(list(ids), [float(x) for x in lps] if len(lps) == len(ids) else None,  # type: ignore[arg-type]
                             "length" if choice.get("finish_reason") == "length" else "stop") if ids else None
            gens.append(gen)
            records.append(gateway_span(CallRecord(
                session=session, trace_id=trace_id, parent_span_id=parent,
                sequence=self.next_sequence(session or f"trace:{trace_id}"), request=req,
                prompt_ids=list(prompt_ids) if prompt_ids and gen else None, generation=gen,
                message=choice.get("message") or {}, finish_reason=str(choice.get("finish_reason")),
                response_id=str(doc.get("id", "")), model=self.engine.model_name,
                start_ns=start, end_ns=end, stream=req.stream)))
        await self.record(records)
        doc["model"] = self.engine.model_name
        return doc, gens

    async def one_chat(self, request: Request, path_session: str | None, req: p.ChatRequest, chat: dict[str, Any]
                       ) -> tuple[str, dict[str, Any], Generation | None, dict[str, int]]:
        """The one chat call another API was translated to (Responses, Messages): (id, choice,
        its generation, usage). Behind an upstream engine it is forwarded, unstreamed, and has no
        generation of ours."""
        if getattr(self.engine, "passthrough", False):
            doc, _ = await self.forward(request, path_session, req, {**chat, "stream": False})
            rid, got = str(doc.get("id", "")), doc.get("usage") or {}
            usage = {k: int(got.get(k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
            return rid, (doc.get("choices") or [{"message": {}, "finish_reason": "stop"}])[0], None, usage
        rid, gens, choices, usage, _ = await self.chat_call(request, path_session, req)
        return rid, choices[0], gens[0], usage

    async def responses(self, request: Request, path_session: str | None) -> Response:
        """The Responses API, served and recorded as a chat call (see :mod:`.responses`); to a
        hosted model behind an upstream engine, forwarded as one."""
        body = await read_json(request)
        chat = rs.chat_request(body)
        req = p.ChatRequest.model_validate(chat)
        self.check_model(req.model)
        rid, choice, _, usage = await self.one_chat(request, path_session, req, chat)
        answer = rs.response(rid, self.engine.model_name, choice.get("message") or {}, usage, body,
                             str(choice.get("finish_reason")))
        if req.stream:
            return StreamingResponse(rs.sse_events(answer), media_type="text/event-stream")
        return json_response(answer)

    # -- completions ------------------------------------------------------------------

    def completion_prompt(self, req: p.CompletionRequest) -> list[int]:
        prompt = req.prompt
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
            if len(prompt) != 1:
                raise p.APIError(400, "send one prompt per request (a batch of prompts is not supported)", param="prompt")
            prompt = prompt[0]
        tok = self.engine.tokenizer
        try:
            ids = list(prompt) if isinstance(prompt, list) else tok.encode(prompt, add_special_tokens=False)
        except Exception as exc:  # e.g. a lone UTF-16 surrogate, which is not text
            raise p.APIError(400, f"the tokenizer rejected this prompt: {exc}", param="prompt") from exc
        if not ids:
            raise p.APIError(400, "prompt is empty", param="prompt")
        if any(not isinstance(t, int) or not 0 <= t < len(tok) for t in ids):
            raise p.APIError(400, f"prompt token ids must be integers in [0, {len(tok)})", param="prompt")
        return [t for t in ids if isinstance(t, int)]  # all of them (checked): typed for the checker

    def completion_choice(self, gen: Generation, index: int, req: p.CompletionRequest,
                          prompt_ids: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
        text = self.text_of(gen)
        choice: dict[str, Any] = {"index": index, "text": text, "finish_reason": gen.finish_reason, "logprobs": None}
        if req.logprobs is not None:
            pieces = [self.engine.tokenizer.decode([t], skip_special_tokens=False) for t in gen.token_ids]
            choice["logprobs"] = {"tokens": pieces, "token_logprobs": gen.logprobs, "top_logprobs": None,
                                  "text_offset": None}
        if req.return_token_ids:
            choice["prompt_token_ids"], choice["token_ids"] = prompt_ids, gen.token_ids
        return choice, {"role": "assistant", "content": text}

    async def completions(self, request: Request, path_session: str | None) -> Response:
        req = p.CompletionRequest.model_validate(await read_json(request))
        self.check_model(req.model)
        if req.stream:
            raise p.APIError(400, "streaming is supported on /v1/chat/completions only", param="stream")
        prompt_ids = self.completion_prompt(req)
        rid, _, choices, usage = await self.run_and_record(
            request, path_session, req, prompt_ids, lambda g, i: self.completion_choice(g, i, req, prompt_ids))
        return json_response({"id": rid, "object": "text_completion", "created": p.now(),
                              "model": self.engine.model_name, "choices": choices, "usage": usage})

    # -- OTLP ---------------------------------------------------------------------------

    async def otlp(self, request: Request) -> Response:
        ctype = request.headers.get("content-type", "application/x-protobuf")
        body = p.inflate(await request.body(), request.headers.get("content-encoding"), self.max_body_bytes)
        try:
            records = decode_otlp(body, ctype)
        except SpanDecodeError as exc:
            raise p.APIError(400, str(exc), code="invalid_otlp") from exc
        except Exception as exc:  # the decoder is pure: whatever else it raises, the body caused
            # (protobuf's JSON parser raises SystemError on a lone surrogate, for one)
            log.warning("OTLP body the decoder did not expect: %s: %s", type(exc).__name__, exc)
            raise p.APIError(400, f"OTLP body could not be decoded: {type(exc).__name__}: {exc}",
                             code="invalid_otlp") from exc
        await self.record(records)
        if "json" in ctype:
            return json_response({})
        return Response(b"", media_type="application/x-protobuf")


MAX_SESSION_SEED = 2**62  # |seed| below it, so seed + sequence number stays within what engines take


def session_seed(request: Request) -> int | None:
    """The sampling seed of the request's session, from a ``/sessions/{id}/seed/{seed}`` URL;
    None (each call drawn at random) without one.

    A seeded session's call without a ``seed`` of its own samples from session seed + its
    sequence number, so a seeded run samples the same tokens whatever the thread timing, even
    when the agent's code passes no seed (LangChain's ChatOpenAI does not, by default). The
    seed rides in the URL, the one thing every call of a session carries whatever its client,
    to an in-process gateway and to a ``tracerl gateway serve`` elsewhere alike: baggage would
    need an instrumented client, and telling the gateway each session's seed beforehand would
    be a call to make and state to keep. Calls forwarded to an upstream engine are not seeded:
    a hosted model's own seeding is its business.
    """
    raw = request.path_params.get("seed")
    if raw is None:
        return None
    try:
        seed = int(raw)
    except ValueError:
        seed = None
    if seed is None or abs(seed) >= MAX_SESSION_SEED:
        raise p.APIError(400, f"the session seed in the URL must be an integer of magnitude below 2**62, "
                              f"not {raw!r}", param="seed")
    return seed


class PromptCache:
    """The token ids of recent first prompts, by their messages and tools. A GRPO group sends
    the same prompt once per sample, each in a session of its own, and rendering the chat
    template and tokenizing it was about a third of the gateway's CPU per call (measured:
    ~0.5 ms of ~1.5 ms, profiled). The date is part of the key, for templates that print it."""

    def __init__(self, size: int = 1024):
        self.size = size
        self._ids: dict[bytes, tuple[int, ...]] = {}

    def key(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> bytes | None:
        try:
            return orjson.dumps([time.strftime("%Y-%m-%d"), messages, tools])
        except TypeError:  # not plain JSON (never from a request body): render it every time
            return None

    def get(self, key: bytes | None) -> list[int] | None:
        ids = self._ids.get(key) if key is not None else None
        return list(ids) if ids is not None else None

    def put(self, key: bytes | None, ids: list[int]) -> None:
        if key is None:
            return
        self._ids[key] = tuple(ids)
        if len(self._ids) > self.size:  # insertion order: the oldest goes first
            del self._ids[next(iter(self._ids))]


# FastAPI >= 0.160 traces every request into the global TracerProvider: an in-process gateway
# would put its HTTP spans into the user's own tracing. The gateway records its own spans.
_NO_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}
)


def create_app(engine: Engine, store: SpanStore, *, api_key: str | None = None,
               model_aliases: tuple[str, ...] = (), max_body_bytes: int = MAX_BODY_BYTES,
               continue_tokens: bool = True, accept_weights: bool = False) -> FastAPI:
    """The ASGI app. Serve it with uvicorn, or use :class:`tracerl.gateway.GatewayServer`.
    ``continue_tokens``: a session's next prompt continues its last call's tokens (:mod:`.turns`);
    ``accept_weights``: a trainer may replace the engine's weights (:mod:`.admin`)."""
    gw = Gateway(engine, store, model_aliases=model_aliases, continue_tokens=continue_tokens,
                 max_body_bytes=max_body_bytes)
    app = FastAPI(title="tracerl gateway", docs_url=None, redoc_url=None, openapi_url=None, **_NO_TELEMETRY)
    app.state.gateway = gw
    probe = StoreProbe(store)

    @app.exception_handler(p.APIError)
    async def _api_error(request: Request, exc: p.APIError) -> Response:
        return json_response(error_body(exc, request.url.path), exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # Unknown path (404), wrong method (405): an OpenAI-style body too, not plain text.
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        err = p.APIError(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}", code=code)
        return json_response(error_body(err, request.url.path), exc.status_code, exc.headers)

    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: ValidationError) -> Response:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        err = p.APIError(400, f"invalid request: {where}: {first.get('msg')}", param=where or None)
        return json_response(error_body(err, request.url.path), 400)

    @app.exception_handler(StoreError)
    async def _store_down(request: Request, exc: StoreError) -> Response:
        # Nothing was stored, so nothing is acknowledged: a 503 is what OTLP exporters and the
        # OpenAI SDKs retry (a shared PostgreSQL restarting, say); the call's answer is withheld.
        log.warning("span store failed on %s: %s", request.url.path, exc)
        err = p.APIError(503, f"the span store is unavailable, nothing was recorded: {exc}", type="server_error",
                         code="store_unavailable")
        return json_response(error_body(err, request.url.path), 503, {"Retry-After": "1"})

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> Response:
        log.exception("gateway error on %s", request.url.path)
        err = p.APIError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")
        return json_response(error_body(err, request.url.path), 500)

    async def health(request: Request) -> Response:
        return json_response(*await probe.answer(engine, accept_weights))  # 503 while the store is down

    async def weights(request: Request) -> Response:
        return json_response(await admin.receive_weights(request, engine, accept_weights))

    async def models(request: Request) -> Response:
        return json_response({"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "tracerl", "max_model_len": engine.max_context}
            for m in sorted(gw.models)
        ]})

    async def chat(request: Request) -> Response:
        return await gw.chat(request, request.path_params.get("session_id"))

    async def completions(request: Request) -> Response:
        return await gw.completions(request, request.path_params.get("session_id"))

    async def responses(request: Request) -> Response:
        return await gw.responses(request, request.path_params.get("session_id"))

    async def messages(request: Request) -> Response:
        return await ms.serve(gw, request, request.path_params.get("session_id"))

    async def count_tokens(request: Request) -> Response:
        return await ms.count_tokens(gw, request)

    # Plain Starlette routes: FastAPI's dependency solving and response validation would
    # add work per call for no use here (we validate bodies ourselves, with our errors).
    app.add_route("/health", health, methods=["GET"])
    for prefix in ("", "/sessions/{session_id}", "/sessions/{session_id}/seed/{seed}"):
        app.add_route(prefix + "/v1/models", models, methods=["GET"])
        app.add_route(prefix + "/v1/chat/completions", chat, methods=["POST"])
        app.add_route(prefix + "/v1/completions", completions, methods=["POST"])
        app.add_route(prefix + "/v1/responses", responses, methods=["POST"])
        app.add_route(prefix + "/v1/messages", messages, methods=["POST"])
        app.add_route(prefix + "/v1/messages/count_tokens", count_tokens, methods=["POST"])
    app.add_route("/v1/traces", gw.otlp, methods=["POST"])
    app.add_route(admin.PATH, weights, methods=["POST"])
    app.add_middleware(_Guard, limit=max_body_bytes, api_key=api_key)
    return app
