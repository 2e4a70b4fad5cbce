"""Anthropic's Messages API (``POST /v1/messages``) served by the chat path.

Agents written against the ``anthropic`` SDK, LangChain's ``ChatAnthropic`` or a harness that
takes ``ANTHROPIC_BASE_URL`` train unchanged but for that URL. A request becomes a Chat
Completions request (``system`` the system message, ``tool_use`` blocks the assistant's
``tool_calls``, ``tool_result`` blocks ``tool`` messages, ``input_schema`` a function's
parameters, ``stop_sequences`` stop strings), is generated and recorded exactly as a chat call
(the same chat template and token-level span: the converter, trainer and dashboard see no
difference), and the answer goes back as a Message with ``stop_reason`` mapped, or, streamed,
as Anthropic's event sequence (``message_start`` ... ``message_stop``).

Refused with a 400 that says why: extended ``thinking`` (the policy's template has no thinking
turn, so a thinking budget would be silently ignored), image and document blocks (the policy
reads text), server tools (web search, bash: nothing here runs them) and ``tool_choice`` that
forces a tool (the engine cannot force a call). Errors on these routes are Anthropic-shaped:
``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from . import protocol as p
from .http import json_response, read_json

PATHS = ("/v1/messages", "/v1/messages/count_tokens")
# Anthropic's error types by status (docs.anthropic.com, "Errors")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
                429: "rate_limit_error", 529: "overloaded_error"}
_STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use"}


def is_messages_path(path: str) -> bool:
    return path.endswith(PATHS)


def error_body(err: p.APIError) -> dict[str, Any]:
    """``err`` as Anthropic writes an error (the SDK raises its typed error from ``error.type``)."""
    kind = _ERROR_TYPES.get(err.status, "api_error" if err.status >= 500 else "invalid_request_error")
    message = f"{err.param}: {err.message}" if err.param and not err.message.startswith(err.param) else err.message
    return {"type": "error", "error": {"type": kind, "message": message}}


def _fail(message: str, param: str | None = None) -> p.APIError:
    return p.APIError(400, message, param=param)


def _text(content: Any, where: str) -> str:
    """The text of a string or a list of text blocks (a system prompt, a tool result)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _fail(f"{where} must be a string or a list of text blocks, not {type(content).__name__}", where)
    texts = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise _fail(f"{where}[{i}] must be a text block with a string 'text', not {kind!r} (the policy "
                        "reads text only)", where)
        texts.append(block["text"])
    return "\n".join(texts)


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise _fail(f"{where} must be a string or a list of content blocks", where)
    return content


def _user(content: Any, where: str) -> list[dict[str, Any]]:
    """A user turn: its ``tool_result`` blocks as ``tool`` messages, then its text as one user message."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for i, block in enumerate(_blocks(content, where)):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
            result = _text(block.get("content", ""), f"{where}[{i}].content")
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": result})
        else:
            raise _fail(f"{where}[{i}]: a user turn holds text and tool_result blocks (with a string "
                        f"tool_use_id), not {kind!r}", where)
    if texts or not out:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant(content: Any, where: str) -> dict[str, Any]:
    """An assistant turn: its text as content (None when it has none), ``tool_use`` blocks as calls."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(_blocks(content, where)):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": block.get("input") or {}}})
        else:
            raise _fail(f"{where}[{i}]: an assistant turn holds text and tool_use blocks (with a string id "
                        f"and name), not {kind!r}", where)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(tools: Any, choice: Any) -> list[dict[str, Any]]:
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in ("auto", "any", "tool", "none"):
            raise _fail("tool_choice must be an object with type auto, any, tool or none", "tool_choice")
        if kind in ("any", "tool"):
            raise _fail(f"tool_choice {kind!r} is not supported: the policy decides whether to call a tool; "
                        "send tool_choice auto", "tool_choice")
        if kind == "none":
            return []
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _fail(f"tools must be a list, not {type(tools).__name__}", "tools")
    out = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or t.get("type", "custom") != "custom":
            kind = t.get("type") if isinstance(t, dict) else type(t).__name__
            raise _fail(f"tools[{i}]: only client tools with a name and an input_schema are served here, not "
                        f"{kind!r} (nothing here runs server tools)", "tools")
        schema = t.get("input_schema", {"type": "object"})
        if not isinstance(schema, dict):
            raise _fail(f"tools[{i}].input_schema must be an object", "tools")
        fn: dict[str, Any] = {"name": t["name"]}  # in Chat Completions' order: templates print the JSON
        if isinstance(t.get("description"), str):
            fn["description"] = t["description"]
        fn["parameters"] = schema
        out.append({"type": "function", "function": fn})
    return out


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a Messages request: the system prompt, then each turn."""
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise _fail("messages must be a non-empty list of turns", "messages")
    out: list[dict[str, Any]] = []
    if body.get("system") is not None:
        out.append({"role": "system", "content": _text(body["system"], "system")})
    for i, turn in enumerate(turns):
        role = turn.get("role") if isinstance(turn, dict) else None
        where = f"messages[{i}].content"
        if role == "user":
            out += _user(turn.get("content"), where)
        elif role == "assistant":
            out.append(_assistant(turn.get("content"), where))
        else:
            raise _fail(f"messages[{i}].role must be 'user' or 'assistant', not {role!r}", "messages")
    return out


def chat_request(body: Any, *, counting: bool = False) -> dict[str, Any]:
    """The Chat Completions request a Messages request asks for (validated by the chat path);
    ``counting``: for count_tokens, which takes no ``max_tokens``."""
    if not isinstance(body, dict):
        raise _fail("the request body must be a JSON object")
    thinking = body.get("thinking")
    if thinking is not None and not (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        raise _fail("extended thinking is not supported: the policy's chat template has no thinking turn, so "
                    "a thinking budget would be ignored; leave thinking out", "thinking")
    if not counting and not isinstance(body.get("max_tokens"), int):
        raise _fail("max_tokens is required (an integer of at least 1)", "max_tokens")
    stop = body.get("stop_sequences")
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise _fail("stop_sequences must be a list of strings", "stop_sequences")
    keys = ("model", "temperature", "top_p", "top_k", "max_tokens", "stream", "seed")  # seed: ours, as vLLM's
    chat: dict[str, Any] = {k: body[k] for k in keys if body.get(k) is not None}
    if counting:
        chat.pop("max_tokens", None)
    if stop:
        chat["stop"] = stop
    chat["messages"] = chat_messages(body)
    tools = _tools(body.get("tools"), body.get("tool_choice"))
    if tools:
        chat["tools"] = tools
    return chat


def message(rid: str, model: str, chat: dict[str, Any], finish_reason: str, stop: str | None,
            usage: dict[str, int]) -> dict[str, Any]:
    """A Message for one generated chat message. ``stop``: the stop sequence that ended it, if any."""
    content: list[dict[str, Any]] = []
    if chat.get("content"):
        content.append({"type": "text", "text": chat["content"]})
    for tc in chat.get("tool_calls") or ():
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            args = None
        content.append({"type": "tool_use", "id": "toolu_" + str(tc.get("id") or "").removeprefix("call_"),
                        "name": str(fn.get("name") or ""), "input": args if isinstance(args, dict) else {}})
    reason = "stop_sequence" if stop is not None else _STOP_REASONS.get(finish_reason, "end_turn")
    return {"id": "msg_" + rid.split("-", 1)[-1], "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": reason, "stop_sequence": stop,
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def sse_events(doc: dict[str, Any], text_pieces: list[str] | None = None) -> Iterator[bytes]:
    """The streamed form of a finished Message, as the SDK's stream parser reads it: each block
    opened, its text (``text_pieces``, a token each, when given) or its input as JSON deltas,
    closed; then ``message_delta`` with the stop reason and ``message_stop``."""
    head = {**doc, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**doc["usage"], "output_tokens": 0}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": head}, {"type": "ping"}]
    for index, block in enumerate(doc["content"]):
        start: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            pieces = text_pieces if text_pieces and "".join(text_pieces) == block["text"] else [block["text"]]
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
        else:
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": doc["stop_reason"],
                                                      "stop_sequence": doc["stop_sequence"]},
                   "usage": {"output_tokens": doc["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


async def serve(gw: Any, request: Any, path_session: str | None) -> Any:
    """``POST /v1/messages`` on ``gw`` (a :class:`~tracerl.gateway.app.Gateway`): one chat call,
    recorded as one, answered as a Message; behind an upstream engine, forwarded as a chat call."""
    from starlette.responses import StreamingResponse

    from .streaming import text_pieces

    body = await read_json(request)
    chat = chat_request(body)
    req = p.ChatRequest.model_validate(chat)
    gw.check_model(req.model)
    rid, choice, gen, usage = await gw.one_chat(request, path_session, req, chat)
    stop = gen.stop_reason if gen is not None and isinstance(gen.stop_reason, str) else None
    answer = message(rid, gw.engine.model_name, choice.get("message") or {}, str(choice.get("finish_reason")),
                     stop, usage)
    if not req.stream:
        return json_response(answer)
    pieces = None
    if gen is not None and answer["content"] and answer["content"][0]["type"] == "text":
        pieces = text_pieces(answer["content"][0]["text"], gen.token_ids, gw.engine.tokenizer)
    return StreamingResponse(sse_events(answer, pieces), media_type="text/event-stream")


async def count_tokens(gw: Any, request: Any) -> Any:
    """``POST /v1/messages/count_tokens``: the prompt's length as the chat template renders it."""
    chat = chat_request(await read_json(request), counting=True)
    req = p.ChatRequest.model_validate(chat)
    gw.check_model(req.model)
    if getattr(gw.engine, "passthrough", False):
        raise p.APIError(400, "count_tokens needs the policy's tokenizer: this gateway forwards to an upstream "
                              "API, which counts its own tokens", param="model")
    return json_response({"input_tokens": len(gw.chat_prompt(p.template_messages(req.messages), req.tools))})
