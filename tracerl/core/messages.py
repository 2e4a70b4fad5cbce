"""GenAI JSON chat messages: reading ``gen_ai.input.messages`` / ``gen_ai.output.messages``
(and OpenAI-shaped messages in the same attributes) into :class:`Message`, and writing them.

This is the converter's hottest path: a gateway span of call k repeats the whole conversation
of calls 0..k-1, so :class:`MessageCache` parses each message of an episode once and shares
the resulting objects between steps. Every value handed to :func:`.types.construct` is of the
field's type by construction, so models are built without re-validation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import _json
from .types import Message, ToolCall, construct


def loads(text: Any) -> Any:
    """Parse JSON text; anything that is not text passes through; invalid text gives None."""
    if not isinstance(text, str):
        return text
    try:
        return _json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested past the parser's depth
        return None


def text(value: Any) -> str | None:
    """A string as is; any other JSON value as compact JSON text (tool arguments, results)."""
    if value is None or isinstance(value, str):
        return value
    return _json.dumps(value)


def opt_str(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    """A ToolCall from loosely typed values (coerced here, so no validation is needed)."""
    return construct(ToolCall, id=opt_str(call_id), name=opt_str(name) or "",
                     arguments=(arguments if type(arguments) is str else text(arguments)) or "{}")


def openai_tool_call(tc: Any) -> ToolCall | None:
    if not isinstance(tc, dict):
        return None
    fn = tc["function"] if isinstance(tc.get("function"), dict) else tc
    return tool_call(tc.get("id"), fn.get("name"), fn.get("arguments"))


def openai_content(content: Any) -> str | None:
    """OpenAI message content: a string or a list of ``{"type": "text", "text"}`` parts."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict)) or None
    return text(content)


def genai_message(m: Any) -> Message | None:
    """One GenAI JSON message: typed ``parts``, or OpenAI shape, or both.

    LiteLLM's otel callback writes ``parts`` *and* OpenAI ``tool_calls`` / ``tool_call_id``
    on the same message, so both are read.
    """
    if type(m) is not dict:
        return None
    get = m.get
    parts = get("parts")
    name = get("name")
    if name is not None and type(name) is not str:
        name = opt_str(name)
    if type(parts) is list and len(parts) == 1 and "tool_calls" not in m:
        p = parts[0]  # the common case, one text part: no general parsing
        if type(p) is dict and p.get("type") == "text" and type(p.get("content")) is str:
            role = get("role")
            return construct(Message, role=role if type(role) is str and role else "user", content=p["content"],
                             name=name, tool_calls=[], tool_call_id=opt_str(get("tool_call_id")), reasoning=None)
    if isinstance(parts, list):
        content, reasoning, tool_calls, tool_call_id = genai_parts(parts)
    else:
        content, reasoning, tool_calls, tool_call_id = openai_content(get("content")), None, [], None
    if tool_calls:
        if content == "":
            content = None  # an empty text part next to tool calls means "no text"
    else:
        openai_calls = get("tool_calls")
        if openai_calls:
            tool_calls = [c for c in map(openai_tool_call, openai_calls) if c is not None]
            if tool_calls and content == "":
                content = None
    role = get("role")
    own_id = get("tool_call_id")
    # Every field is a str/None/list[ToolCall] by construction: no validation needed.
    return construct(
        Message,
        role=role if type(role) is str and role else str(role or "user"),
        content=content,
        name=name,
        tool_calls=tool_calls,
        tool_call_id=(opt_str(own_id) if own_id is not None else None) or opt_str(tool_call_id),
        reasoning=reasoning,
    )


def genai_parts(parts: list[Any]) -> tuple[str | None, str | None, list[ToolCall], str | None]:
    """``(text, reasoning, tool calls, tool_call_id)`` of a GenAI ``parts`` list.

    Texts (and reasoning) of several parts are concatenated, None when there is no such part.
    """
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = []
    tool_call_id = None
    for p in parts:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "text":  # "content" per semconv; OpenAI parts passed through use "text"
            value = p["content"] if "content" in p else p.get("text", "")
            if type(value) is not str:
                value = str(value)
            content = value if content is None else content + value
        elif kind == "tool_call":
            args = p.get("arguments")
            call_id, call_name = p.get("id"), p.get("name")
            tool_calls.append(construct(
                ToolCall,
                id=call_id if call_id is None or type(call_id) is str else opt_str(call_id),
                name=(call_name if type(call_name) is str else opt_str(call_name)) or "",
                arguments=(args if type(args) is str else text(args)) or "{}",
            ))
        elif kind == "tool_call_response":
            tool_call_id = p.get("id")
            value = text(p["response"] if "response" in p else p.get("result")) or ""
            content = value if content is None else content + value
        elif kind == "reasoning":
            value = str(p.get("content", ""))
            reasoning = value if reasoning is None else reasoning + value
    return content, reasoning, tool_calls, tool_call_id


def genai_messages(raw: list[Any]) -> list[Message]:
    return [m for m in map(genai_message, raw) if m is not None]


class MessageCache:
    """Parsed GenAI messages of the earlier calls of one episode.

    Call k+1 of a conversation repeats call k's history, so its ``gen_ai.input.messages``
    text usually starts with call k's: only the new tail is parsed, and the earlier Message
    objects are reused (shared between steps). The tail usually starts with call k's answer,
    written exactly as in call k's ``gen_ai.output.messages``: that Message is reused too.
    Reading an episode is linear in its length, and each message is parsed once.

    Shared objects are safe because equal text gives equal messages and nothing in the
    converter mutates a message after reading it (an output message that was amended is
    not offered for reuse).
    """

    def __init__(self, size: int = 16, outputs: int = 4):
        self.entries: list[tuple[str, list[Message]]] = []  # (text without "]", its messages)
        self.outputs: list[tuple[str, Message]] = []  # (one message's JSON text, the message)
        self.size, self.n_outputs = size, outputs
        self._tools: dict[str, list[dict[str, Any]]] = {}

    def tools(self, raw: str, parse: Callable[[Any], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Tool definitions (``parse`` of the JSON), once per distinct text: every call repeats them."""
        found = self._tools.get(raw)
        if found is None:
            found = self._tools[raw] = parse(loads(raw))
        return found

    def parse(self, raw: str) -> list[Message] | None:
        """The messages of a JSON array text (None if it is not one), parsing only what is new."""
        for prefix, messages in self.entries:
            if raw.startswith(prefix):
                rest = raw[len(prefix):].lstrip()
                if rest.startswith("]") and not rest[1:].strip():
                    return list(messages)
                if rest.startswith(","):
                    tail = self._tail(rest[1:])
                    if tail is not None:
                        return self._add(raw, messages + tail)
        parsed = loads(raw)
        return self._add(raw, genai_messages(parsed)) if isinstance(parsed, list) else None

    def output(self, raw: str, message: Message) -> None:
        """Offer a call's output message (``raw``: its one-message JSON array) for reuse."""
        body = raw.strip()
        if body.startswith("[") and body.endswith("]"):
            self.outputs.insert(0, (body[1:-1].strip(), message))
            del self.outputs[self.n_outputs:]

    def _tail(self, text: str) -> list[Message] | None:
        """Messages of ``text``, a JSON array without its ``[``; None if it is not valid."""
        text = text.lstrip()
        head: list[Message] = []
        for known, message in self.outputs:
            if known and text.startswith(known):
                # One complete JSON object cannot be a proper prefix of another value, so the
                # array's next element is exactly that object.
                after = text[len(known):].lstrip()
                if after.startswith("]") and not after[1:].strip():
                    return [message]
                if after.startswith(","):
                    head, text = [message], after[1:]
                break
        parsed = loads("[" + text)
        if not isinstance(parsed, list):
            return None
        return head + genai_messages(parsed) if head else genai_messages(parsed)

    def _add(self, raw: str, messages: list[Message]) -> list[Message]:
        prefix = raw.rstrip()[:-1].rstrip()  # without the closing bracket
        if messages and len(prefix) > 1:
            self.entries.insert(0, (prefix, messages))
            del self.entries[self.size:]
        return list(messages)


def genai_doc(role: str, content: str | None, calls: Iterable[tuple[str | None, str, str]], *,
              name: str | None = None, tool_call_id: str | None = None, reasoning: str | None = None) -> dict[str, Any]:
    """One message as a GenAI JSON message (``role``, ``parts``, ``name``); ``calls`` are its
    tool calls as (id, name, arguments text). The adapters build these straight from their
    framework's messages, :func:`genai_message_json` from ours: one shape for both."""
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": tool_call_id, "response": content})
    elif content is not None:
        parts.append({"type": "text", "content": content})
    for call_id, call_name, arguments in calls:
        args = loads(arguments)
        parts.append({"type": "tool_call", "id": call_id, "name": call_name,
                      "arguments": args if args is not None else arguments})
    doc: dict[str, Any] = {"role": role, "parts": parts}
    if name:
        doc["name"] = name
    return doc


def genai_message_json(messages: list[Message]) -> str:
    """Our messages as a GenAI ``gen_ai.input.messages`` / ``output.messages`` JSON string."""
    return _json.dumps([  # orjson on the adapters' hot path: ~5x json.dumps
        genai_doc(m.role, m.content, [(tc.id, tc.name, tc.arguments) for tc in m.tool_calls], name=m.name,
                  tool_call_id=m.tool_call_id, reasoning=m.reasoning)
        for m in messages
    ])


def responses_to_chat(items: Any, instructions: Any = None) -> list[dict[str, Any]]:
    """OpenAI Responses API items (a request's ``input``, a response's ``output``; dicts or
    the SDK's pydantic objects; a plain string is one user message) as Chat Completions
    messages, the shape the rest of tracerl reads. A ``function_call`` joins the assistant
    message before it, as tool calls do in Chat Completions; ``instructions`` become the
    system message. Items that are no chat message (reasoning, built-in tool calls) are left
    out."""
    out: list[dict[str, Any]] = []
    if isinstance(instructions, str) and instructions:
        out.append({"role": "system", "content": instructions})
    if isinstance(items, str):
        return [*out, {"role": "user", "content": items}]
    for item in items or ():
        if not isinstance(item, dict):
            item = item.model_dump() if hasattr(item, "model_dump") else {}
        kind = item.get("type") or "message"
        if kind == "message":
            content = item.get("content")
            if isinstance(content, list):  # input_text / output_text parts
                content = "".join(str(p.get("text", "")) for p in content
                                  if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text"))
            out.append({"role": str(item.get("role") or "user"), "content": content})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name") or "", "arguments": item.get("arguments") or "{}"}}
            if out and out[-1]["role"] == "assistant":
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text(item.get("output"))})
    return out
