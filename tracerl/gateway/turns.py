"""Token in, token out across turns: a session's next prompt continues the tokens it was given.

A chat API takes the whole conversation back each turn, as text, and the gateway renders it
with the chat template again. Where the template writes the model's turn differently from how
the model wrote it (a small model's bare JSON tool call, re-rendered as the template's
``<tool_call>`` block; other whitespace; a reasoning section dropped), the new prompt does not
extend the old prompt and response, the episode splits into sequences at every turn
(``prefix_breaks``), and the model is trained on a history it never produced.

So the gateway remembers each session's last call in each of its contexts: the messages it
was asked, its prompt ids, the ids it sampled and the message it returned. When a request of
the session holds exactly those messages, then that assistant message unchanged (content, tool
names and arguments; call ids may differ), then anything new, its prompt is the old prompt +
the sampled ids + the template's rendering of what follows that turn (the text the template
puts after the turn's end token, then the new messages and the generation prompt). Otherwise,
or when the sampled turn did not end on a special token (cut by ``max_tokens``, a stop
string), the whole conversation is rendered as before.

A session holds several contexts at once when a supervisor's calls interleave with a
sub-agent's (S1, B1, S2): the sub-agent's call must not make the supervisor's next turn be
rendered anew, so up to ``contexts`` contexts are kept per session, the one a call continues
replaced by that call and the least recently used dropped first.
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Turn:
    messages: list[dict[str, Any]]
    tools: str  # the tool definitions, as canonical JSON
    prompt_ids: list[int]
    response_ids: list[int]
    returned: tuple[Any, ...]  # the assistant message sent back, as _key gives it


def _key(message: dict[str, Any]) -> tuple[Any, ...]:
    """What must come back unchanged of an assistant message: its text and its calls (name,
    arguments as an object; ids and formatting aside)."""
    calls = []
    for tc in message.get("tool_calls") or ():
        fn = tc.get("function") or tc
        args = fn.get("arguments", {})
        if isinstance(args, str):
            with contextlib.suppress(ValueError, RecursionError):
                args = json.loads(args)
        calls.append((fn.get("name"), json.dumps(args, sort_keys=True)))
    return message.get("role"), message.get("content") or "", tuple(calls)


class Turns:
    """The last call of each of up to ``contexts`` contexts in up to ``size`` sessions (least
    recently used dropped first)."""

    def __init__(self, tokenizer: Any, size: int = 4096, contexts: int = 16):
        self.tokenizer = tokenizer
        self.size, self.contexts = size, contexts
        self._last: OrderedDict[str, list[Turn]] = OrderedDict()
        self._special = frozenset(getattr(tokenizer, "all_special_ids", ()) or ())

    def remember(self, session: str | None, messages: list[dict[str, Any]], tools: Any, prompt_ids: list[int],
                 response_ids: list[int], returned: dict[str, Any]) -> None:
        if session is None:
            return
        # The call replaces the context it continued (or repeated); the others stay.
        turns = [t for t in self._last.get(session, ()) if not _continues(messages, t)]
        if response_ids and response_ids[-1] in self._special:
            turns.append(Turn(messages, _tools(tools), list(prompt_ids), list(response_ids), _key(returned)))
        # else cut short (max_tokens, a stop string): that context's next turn is rendered in full
        self._last[session] = turns[-self.contexts:]
        self._last.move_to_end(session)
        while len(self._last) > self.size:
            self._last.popitem(last=False)

    def prompt(self, session: str | None, messages: list[dict[str, Any]], tools: Any) -> list[int] | None:
        """The continued prompt of ``messages`` in ``session``, or None to render it in full."""
        turns = self._last.get(session, ()) if session is not None else ()
        tools_key = _tools(tools)
        matches = [t for t in turns if t.tools == tools_key and len(messages) > len(t.messages) + 1
                   and _continues(messages, t) and _key(messages[len(t.messages)]) == t.returned]
        if not matches:
            return None
        last = max(matches, key=lambda t: len(t.messages))  # the longest history it holds
        k = len(last.messages)
        head = self._render(messages[: k + 1], tools, generation=False)
        full = self._render(messages, tools, generation=True)
        end = self.tokenizer.decode(last.response_ids[-1:], skip_special_tokens=False)
        cut = head.rfind(end)
        if not full.startswith(head) or cut < 0:
            return None
        after = head[cut + len(end):] + full[len(head):]  # the turn's separator, then what is new
        return last.prompt_ids + last.response_ids + list(self.tokenizer.encode(after, add_special_tokens=False))

    def _render(self, messages: list[dict[str, Any]], tools: Any, generation: bool) -> str:
        return str(self.tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation,
                                                      tokenize=False))


def _tools(tools: Any) -> str:
    return json.dumps(tools or [], sort_keys=True)


def _continues(messages: list[dict[str, Any]], turn: Turn) -> bool:
    """``messages`` begin with the messages that turn was asked."""
    return messages[: len(turn.messages)] == turn.messages
