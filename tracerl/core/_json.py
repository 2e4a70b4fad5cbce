"""JSON for the converter's hot path: orjson when installed (a core dependency), else json.

Semantics match ``json.loads``: text orjson refuses (``NaN``/``Infinity`` literals, which our
own exports may hold) falls back to the standard library.
"""

from __future__ import annotations

import json
from typing import Any

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
