"""``POST /admin/weights?version=N``: new weights for the engine behind this gateway.

How a trainer updates gateways it does not own (``tracerl train --gateway URL ...``, replicas):
the body is one safetensors file (:mod:`tracerl.engines.weights_file`), streamed to a
temporary file rather than held in memory, and handed to the engine's ``update_weights``;
the answer comes once generations carry version N, so a trainer that has every replica's
answer knows the next step's rollouts see one weight version. Off unless the gateway was
started with ``accept_weights`` (``tracerl gateway serve --accept-weights``): a gateway that
fronts an app takes no weights from whoever can reach it. Behind the API key like every route.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

from starlette.requests import Request

from . import protocol as p

__all__ = ["MAX_WEIGHTS_BYTES", "PATH", "receive_weights"]

PATH = "/admin/weights"
MAX_WEIGHTS_BYTES = 2**40  # a model's weights are as large as they are; the disk is the limit


async def receive_weights(request: Request, engine: Any, enabled: bool) -> dict[str, Any]:
    """Load the body's weights into ``engine``; the answer the trainer waits for."""
    if not enabled:
        raise p.APIError(403, "this gateway takes no weights: start it with --accept-weights "
                         "(tracerl gateway serve) to let a trainer update it", code="weights_not_accepted")
    try:
        version = int(request.query_params["version"])
    except (KeyError, ValueError):
        raise p.APIError(400, "POST /admin/weights?version=N: N, the weight version, is missing or not an "
                         "integer", param="version") from None
    fd, path = tempfile.mkstemp(prefix="tracerl-weights-", suffix=".safetensors")
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in request.stream():
                out.write(chunk)
        await asyncio.to_thread(_load, engine, path, version)
    finally:
        os.unlink(path)
    return {"weight_version": engine.weight_version, "model": engine.model_name}


def _load(engine: Any, path: str, version: int) -> None:
    from tracerl.engines import weights_file

    try:
        state = weights_file.load(path, str(getattr(engine, "device", "cpu")))
    except Exception as exc:  # noqa: BLE001 - whatever safetensors says of a bad file, as a 400
        raise p.APIError(400, f"the body is not a safetensors file of weights: {exc}") from exc
    try:
        engine.update_weights(state, version)
    except (RuntimeError, KeyError, ValueError) as exc:  # load_state_dict's missing/unexpected/shape errors
        raise p.APIError(400, f"these weights do not fit the served model {engine.model_name}: "
                         f"{str(exc)[:500]}", code="weights_mismatch") from exc
