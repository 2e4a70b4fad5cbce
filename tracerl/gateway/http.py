"""JSON in and out of the gateway's routes: the request body read leniently, the answer
serialised fast. Shared by :mod:`.app` and the routes it delegates to (:mod:`.messages`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response

from . import protocol as p


async def read_json(request: Request) -> Any:
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:  # what orjson refuses but json accepts: NaN, Infinity, integers beyond 64 bits
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise p.APIError(400, f"request body is not valid JSON: {exc}") from exc


def json_response(doc: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """``doc`` as a JSON response, serialised with orjson (a few times faster than json)."""
    try:
        body = orjson.dumps(doc)
    except TypeError:  # integers beyond 64 bits, lone surrogates (echoed input), deep nesting
        body = json.dumps(doc, separators=(",", ":"), default=str).encode()  # ASCII, \u escapes
    return Response(body, status_code=status, headers=headers, media_type="application/json")
