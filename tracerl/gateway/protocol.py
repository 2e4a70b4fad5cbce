"""OpenAI-compatible request models, errors and response shapes for the gateway."""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
import zlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tracerl.core import _json
from tracerl.core.errors import TracerlError
from tracerl.engines.base import SamplingParams

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class APIError(TracerlError):
    """An OpenAI-style error: ``{"error": {"message", "type", "param", "code"}}`` with a 4xx."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def inflate(body: bytes, encoding: str | None, limit: int) -> bytes:
    """A request body as its ``Content-Encoding`` sent it: the OpenTelemetry Collector's
    otlphttp exporter gzips by default, and SDK exporters do with ``compression=gzip``. At most
    ``limit`` bytes once inflated (a small gzip of zeros can be gigabytes)."""
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return body
    if name not in ("gzip", "x-gzip", "deflate"):
        raise APIError(415, f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or none",
                       code="unsupported_encoding")
    inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)  # 32: a gzip or a zlib header, either
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise APIError(400, f"the body is not valid {name}: {exc}", code="invalid_encoding") from exc
    if len(out) > limit:
        raise APIError(413, f"request body over {limit} bytes once inflated", code="body_too_large")
    if not inflater.eof:
        raise APIError(400, f"the body is not valid {name}: it ends before its stream does", code="invalid_encoding")
    return out


class ChatMessage(BaseModel):
    """One request message. Content may be text or a list of parts (text parts are used)."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    @field_validator("tool_calls")
    @classmethod
    def _tool_calls(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """Refuse malformed calls now (not after generating); arguments become JSON text."""
        if v is None:
            return v
        out = []
        for i, tc in enumerate(v):
            fn = tc.get("function")
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise ValueError(f"tool_calls[{i}].function must be an object with a string 'name'")
            if not isinstance(tc.get("id"), (str, type(None))):
                raise ValueError(f"tool_calls[{i}].id must be a string")
            args = fn.get("arguments")
            try:
                if args is not None and not isinstance(args, str):  # clients that send the object itself
                    args = json.dumps(args, separators=(",", ":"))
                if args:  # parsed again downstream (template, span): make sure that cannot blow up
                    _json.loads(args)
            except ValueError:
                pass  # not JSON: kept as the text the model wrote
            except RecursionError as exc:
                raise ValueError(f"tool_calls[{i}].function.arguments nests too deeply") from exc
            out.append({**tc, "function": {**fn, "arguments": args}})
        return out

    def text(self) -> str | None:
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type", "text") == "text")
        return self.content


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="allow")  # clients send fields we do not use (user, store, ...)
    model: str
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)  # vLLM extra; -1 or 0 disable
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 65)  # what torch.manual_seed takes, + n
    n: int = Field(1, ge=1, le=64)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    return_token_ids: bool = False  # vLLM extra: prompt_token_ids + choices[i].token_ids

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and len(v) > 16:
            raise ValueError("at most 16 stop sequences")
        return v

    def sampling(self, max_tokens: int) -> SamplingParams:
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            top_k=max(0, self.top_k or 0),
            stop=tuple(s for s in stop if s),
            seed=self.seed,
            n=self.n,
        )

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)


class CompletionRequest(_Sampling):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: bool = False


def template_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them: text content, tool-call arguments as objects."""
    out = []
    for m in messages:
        doc: dict[str, Any] = {"role": m.role, "content": m.text() or ""}
        if m.name:
            doc["name"] = m.name
        if m.tool_call_id:
            doc["tool_call_id"] = m.tool_call_id
        if m.tool_calls:
            calls = []
            for tc in m.tool_calls:
                fn = tc.get("function") or {}
                args = fn.get("arguments", "{}")
                with contextlib.suppress(ValueError, RecursionError):  # else keep the raw text, printed as is
                    args = _json.loads(args) if isinstance(args, str) else args
                calls.append({"id": tc.get("id"), "type": "function",
                              "function": {"name": fn.get("name", ""), "arguments": args}})
            doc["tool_calls"] = calls
        out.append(doc)
    return out


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split model text into content and OpenAI ``tool_calls`` (asked only when tools were offered).

    The rule: the text's ``<tool_call>{json}</tool_call>`` blocks (Hermes, Qwen) are calls; else
    the whole reply, inside at most one Markdown fence (`````json`` or `````), is a call when it
    is one JSON object with a string ``name`` and an object ``arguments`` (or ``parameters``),
    the bare form small instruct models write. Anything else stays text, prose that contains
    JSON included, and so does a block that is not valid JSON with a ``name``. A call's name is
    not checked against the offered tools: the app answers a call to a tool it lacks with its
    own error (LangGraph's ToolNode: "X is not a valid tool"), which the model can read and
    retry after, and the trainer counts such calls (``rollout/unoffered_tool_calls``).
    """
    calls: list[dict[str, Any]] = []

    def take(match: re.Match[str]) -> str:
        call = _call(match.group(1), "arguments")
        if call is None:
            return match.group(0)
        calls.append(call)
        return ""

    content = _TOOL_CALL.sub(take, text)
    if calls:
        return content.strip() or None, calls
    whole = _FENCED.fullmatch(text)
    body = whole.group(1) if whole is not None else text
    call = _call(body, "arguments", "parameters", bare=True)
    return (None, [call]) if call is not None else (text, [])


_FENCED = re.compile(r"\s*```(?:json)?[ \t]*\n(.*?)\n?```\s*", re.DOTALL)


def _call(body: str, *argument_keys: str, bare: bool = False) -> dict[str, Any] | None:
    """An OpenAI tool call from one JSON object ``{"name": ..., "arguments": {...}}``, else None;
    ``bare`` (no tags around it) also needs the arguments, so that an answer that is JSON with a
    ``name`` field (a cat's) is not taken for a call."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"].strip():
        return None
    key = next((k for k in argument_keys if k in doc), None)
    if bare and key is None:
        return None
    args = doc.get(key, {}) if key is not None else {}
    if isinstance(args, str) and bare:  # a JSON string of the arguments, as OpenAI's API sends them
        with contextlib.suppress(ValueError, RecursionError):
            args = json.loads(args)
        if not isinstance(args, dict):
            return None
    elif not isinstance(args, (dict, str)):
        return None
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": doc["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}}


def completion_id(prefix: str = "chatcmpl") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())
