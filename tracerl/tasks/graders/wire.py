"""Plain data across the line between a reply's process and the tests' process (standard library only).

Its source travels whole into both sandboxed programs (:mod:`.code`). A message is one line
of JSON: ``json.loads`` builds only its own dicts, lists, strings, numbers, booleans and
None, and :func:`decode` turns tagged objects into the other plain types with the decoding
side's own constructors, so no type, ``__eq__`` or ``__hash__`` of the sender's survives:

    None, bool, str, float     JSON's own (NaN and infinities as Python's json writes them)
    int                        JSON's number, or {"i": hex of its bytes} past ~3900 digits
    bytes                      {"b": hex}
    list, tuple, set, frozenset, dict     {"l": [...]}, {"t": [...]}, {"s": [...]}, {"f": [...]}, {"d": [[k, v], ...]}

:func:`encode` accepts exactly these types (not subclasses: an ``int`` whose ``__eq__`` lies
is refused where it is sent, and would be an ``int`` where it is decoded anyway). Anything
else raises :class:`NotPlain`; a message that is not well formed raises ``ValueError``.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any

# Shipped whole into the sandbox's programs, where tracerl is not importable: its errors stand
# outside tracerl's error tree (tests/test_public_api.py reads this flag).
STANDALONE = True
MAX_MESSAGE = 64 * 2**20  # bytes in one message: EvalPlus sends MBs of inputs
_DEPTH = 200  # nesting a message may have (json's own recursion would fail deeper)


_TAGS: dict[type, str] = {list: "l", tuple: "t", set: "s", frozenset: "f"}


class NotPlain(TypeError):
    """A value that is not plain data."""


def _tree(value: Any, depth: int) -> Any:
    if depth > _DEPTH:
        raise NotPlain("nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str or kind is float:
        return value
    if kind is int:  # past ~3900 digits Python will not print or parse an int as text: hex bytes
        if value.bit_length() <= 13000:
            return value
        return {"i": value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True).hex()}
    if kind is bytes:
        return {"b": value.hex()}
    tag = _TAGS.get(kind)
    if tag is not None:
        return {tag: [_tree(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[_tree(k, depth + 1), _tree(v, depth + 1)] for k, v in value.items()]}
    raise NotPlain(f"a {kind.__module__}.{kind.__qualname__} is not plain data")


def encode(value: Any) -> Any:
    """``value`` as a JSON-ready tree (see the module docstring)."""
    return _tree(value, 0)


def _items(payload: Any) -> list[Any]:
    if type(payload) is not list:
        raise ValueError("a container's items are not a list")
    return payload


def decode(tree: Any, depth: int = 0) -> Any:
    """The value a tree from :func:`encode` stands for, built with this process's types."""
    if depth > _DEPTH:
        raise ValueError("nested too deeply")
    if tree is None or type(tree) in (bool, str, int, float):
        return tree
    if type(tree) is not dict or len(tree) != 1:
        raise ValueError(f"not an encoded value: {type(tree).__name__}")
    (tag, payload), = tree.items()
    if tag == "i" and type(payload) is str:
        return int.from_bytes(bytes.fromhex(payload), "big", signed=True)
    if tag == "b" and type(payload) is str:
        return bytes.fromhex(payload)
    if tag == "d":
        return {decode(k, depth + 1): decode(v, depth + 1)
                for k, v in (_pair(p) for p in _items(payload))}
    build = {"l": list, "t": tuple, "s": set, "f": frozenset}.get(tag)
    if build is None:
        raise ValueError(f"unknown tag {tag!r}")
    return build(decode(v, depth + 1) for v in _items(payload))


def _pair(item: Any) -> tuple[Any, Any]:
    if type(item) is not list or len(item) != 2:
        raise ValueError("a dict item is not a [key, value] pair")
    return item[0], item[1]


def dumps(message: dict[str, Any]) -> bytes:
    """One message (a dict of JSON-ready trees) as one line."""
    return json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"


class Channel:
    """Messages over a pair of file descriptors, one line each; reads wait ``timeout`` seconds at most."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(dumps(message))
        while data:
            data = data[os.write(self.write_fd, data):]

    def receive(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; ``EOFError`` when the other side is gone, ``TimeoutError``,
        ``ValueError`` for a line that is not a JSON object or is too long."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_MESSAGE:
                raise ValueError(f"a message longer than {MAX_MESSAGE} bytes")
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                    raise TimeoutError
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise EOFError("the other side closed the channel")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        message = json.loads(line)
        if type(message) is not dict:
            raise ValueError("a message is not a JSON object")
        return message
