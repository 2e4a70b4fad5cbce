"""Server-sent events for streamed chat completions.

The span is recorded before the first byte is sent, from the same generation a
non-streaming call would return, so streamed and non-streamed calls record identical data.
Text is streamed one token at a time; parsed tool calls arrive as one ``tool_calls`` delta.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tracerl.engines.base import Generation


def _event(doc: dict[str, Any], choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {"id": doc["id"], "object": "chat.completion.chunk", "created": doc["created"],
             "model": doc["model"], "choices": choices, **extra}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def text_pieces(text: str, tokens: list[int], tokenizer: Any) -> list[str]:
    """Split ``text`` into per-token deltas (decoding prefixes keeps multi-byte characters whole)."""
    pieces, done = [], ""
    for i in range(1, len(tokens) + 1):
        now = tokenizer.decode(tokens[:i], skip_special_tokens=True)
        if len(now) > len(done) and text.startswith(now):
            pieces.append(now[len(done):])
            done = now
    if done != text:
        pieces.append(text[len(done):] if text.startswith(done) else text)
    return [p for p in pieces if p]


async def sse_chat(doc: dict[str, Any], gens: Sequence[Generation | None], tokenizer: Any,
                   req: Any) -> AsyncIterator[bytes]:
    for choice, gen in zip(doc["choices"], gens):
        i, msg = choice["index"], choice["message"]
        yield _event(doc, [{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        content = msg.get("content") or ""
        plain = tokenizer is not None and gen is not None and not msg.get("tool_calls")
        pieces = text_pieces(content, gen.token_ids, tokenizer) if plain and gen is not None else [content]
        for piece in pieces:
            if piece:
                yield _event(doc, [{"index": i, "delta": {"content": piece}, "finish_reason": None}])
        if msg.get("tool_calls"):
            calls = [dict(tc, index=k) for k, tc in enumerate(msg["tool_calls"])]
            yield _event(doc, [{"index": i, "delta": {"tool_calls": calls}, "finish_reason": None}])
        last: dict[str, Any] = {"index": i, "delta": {}, "finish_reason": choice["finish_reason"]}
        if choice.get("logprobs"):
            last["logprobs"] = choice["logprobs"]
        if "token_ids" in choice:
            last["token_ids"] = choice["token_ids"]
        yield _event(doc, [last])
    if (req.stream_options or {}).get("include_usage"):
        yield _event(doc, [], usage=doc["usage"])
    yield b"data: [DONE]\n\n"
