"""The Responses API (``POST /v1/responses``) served by the chat path.

The OpenAI Agents SDK's default model speaks this API, so an agent needs no change of model
class to train through the gateway. A request becomes a Chat Completions request
(``instructions`` the system message, input items the messages, function tools chat tools,
``max_output_tokens`` the token limit), is generated and recorded exactly as a chat call (the
same token-level span, so training sees no difference), and the answer goes back as a
Response: output items and usage, or, streamed, the event sequence clients read
(``response.created`` ... ``response.completed``). Behind an upstream engine (a hosted model)
the translated request is forwarded as a chat call and recorded as one.

Refused with a 400 that says why: ``previous_response_id`` and ``conversation`` (the gateway
keeps no responses: send the whole conversation as ``input``) and tools that are not
functions (web search, file search: nothing here runs them).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from tracerl.core.messages import responses_to_chat

from . import protocol as p

_SAMPLING = (("temperature", "temperature"), ("top_p", "top_p"), ("max_output_tokens", "max_tokens"),
             ("stream", "stream"), ("model", "model"))


def chat_request(body: Any) -> dict[str, Any]:
    """The Chat Completions request a Responses request asks for (validated by the chat path)."""
    if not isinstance(body, dict):
        raise p.APIError(400, "the request body must be a JSON object")
    for key in ("previous_response_id", "conversation"):
        if body.get(key):
            raise p.APIError(400, f"{key} is not supported: this gateway stores no responses; send the whole "
                                  "conversation as input", param=key)
    offered = body.get("tools") or []
    if not isinstance(offered, list):
        raise p.APIError(400, f"tools must be a list, not {type(offered).__name__}", param="tools")
    tools = []
    for i, t in enumerate(offered):
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("name"), str):
            kind = t.get("type") if isinstance(t, dict) else type(t).__name__
            raise p.APIError(400, f"tools[{i}]: only function tools with a name are served here, not {kind!r}",
                             param="tools")
        tools.append({"type": "function",
                      "function": {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}})
    try:
        messages = responses_to_chat(body.get("input"), body.get("instructions"))
    except (AttributeError, TypeError, ValueError, RecursionError) as exc:  # items that are not items
        raise p.APIError(400, f"input must be a string or a list of items: {type(exc).__name__}: {exc}"[:500],
                         param="input") from exc
    chat: dict[str, Any] = {ours: body[theirs] for theirs, ours in _SAMPLING if body.get(theirs) is not None}
    chat["messages"] = messages
    if tools:
        chat["tools"] = tools
    return chat


def response(rid: str, model: str, message: dict[str, Any], usage: dict[str, int], body: dict[str, Any],
             finish_reason: str) -> dict[str, Any]:
    """A Response document for one generated chat message."""
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:24]}", "status": "completed",
                       "role": "assistant",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for tc in message.get("tool_calls") or ():  # ours, or an upstream's: read defensively
        fn = tc.get("function") or {}
        output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}",
                       "call_id": str(tc.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
                       "name": str(fn.get("name") or ""), "arguments": str(fn.get("arguments") or "{}"),
                       "status": "completed"})
    truncated = finish_reason == "length"
    return {
        "id": rid, "object": "response", "created_at": p.now(), "model": model,
        "status": "incomplete" if truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "output": output, "instructions": body.get("instructions"), "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto", "parallel_tool_calls": True,
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                  "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


def sse_events(doc: dict[str, Any]) -> Iterator[bytes]:
    """The streamed form of a finished Response: the events the OpenAI SDK parses, each item
    announced, its text or arguments in one delta, then ``response.completed`` with it all."""
    events: list[dict[str, Any]] = [{"type": "response.created",
                                     "response": {**doc, "status": "in_progress", "output": [], "usage": None}}]
    for index, item in enumerate(doc["output"]):
        at = {"item_id": item["id"], "output_index": index}
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "status": "in_progress",
                                **({"content": []} if item["type"] == "message" else {"arguments": ""})}})
        if item["type"] == "message":
            part = item["content"][0]
            events += [
                {"type": "response.content_part.added", **at, "content_index": 0, "part": {**part, "text": ""}},
                {"type": "response.output_text.delta", **at, "content_index": 0, "delta": part["text"], "logprobs": []},
                {"type": "response.output_text.done", **at, "content_index": 0, "text": part["text"], "logprobs": []},
                {"type": "response.content_part.done", **at, "content_index": 0, "part": part},
            ]
        else:
            events += [{"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
                       {"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]}]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": doc})
    for n, event in enumerate(events):
        event["sequence_number"] = n
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
