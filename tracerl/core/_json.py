"""JSON for the converter's hot path: orjson when installed (a core dependency), else json.

Semantics match ``json.loads``: text orjson refuses (``NaN``/``Infinity`` literals, which our
own exports may hold) falls back to the standard library.
"""

from __future__ import annotations

import json
import math
from typing import Any

orjson: Any
try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; keep working without it
    orjson = None


def loads(text: str | bytes) -> Any:
    """Parse JSON; raises ValueError on invalid text."""
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # maybe NaN/Infinity: let the standard library decide
    return json.loads(text)


def dumps(value: Any) -> str:
    """Compact JSON text (no spaces)."""
    if orjson is not None:
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            pass
    return json.dumps(value, separators=(",", ":"), default=str)


_PLAIN = (str, int, bool, type(None))  # never non-finite, nothing inside


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (which orjson would write as null).

    Runs for every stored span, so scalars are judged inline rather than by a call each.
    Numeric lists (token ids, log-probabilities: thousands of elements) are judged by their
    sum, computed in C: non-finite if any element is (an overflowing sum only sends the value
    to the exact slow path). OTel sequences are homogeneous, so a list of strings is not
    searched for floats."""
    t = type(value)
    if t is float:
        return math.isfinite(value)
    if t is dict:
        for v in value.values():
            tv = type(v)
            if tv in _PLAIN:
                continue
            if tv is float:
                if not math.isfinite(v):
                    return False
            elif not _finite(v):
                return False
        return True
    if (t is list or t is tuple) and value:
        first = type(value[0])
        if first is float or first is int:
            try:  # in C; an int list's sum is a float only if a float hides in it
                total = sum(value)
            except TypeError:  # mixed with non-numbers: look at each
                return all(_finite(v) for v in value)
            return type(total) is int or math.isfinite(total)
        if first is dict or first is list or first is tuple:
            return all(_finite(v) for v in value)
    return True


def dumps_exact(value: Any) -> str:
    """Compact JSON that keeps NaN and +/-Infinity as the literals ``json.loads`` reads back
    (log-probabilities of -inf are data): orjson when nothing non-finite is in ``value``."""
    if orjson is not None and _finite(value):
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            pass
    return json.dumps(value, separators=(",", ":"), allow_nan=True, default=str)
