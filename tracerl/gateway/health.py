"""``GET /health``: whether this gateway can serve and record, for a load balancer and a trainer.

    200 {"status": "ok", "model": "m", "weight_version": 3, "accepts_weights": false,
         "store_id": "9f2c...", "store": {"ok": true, "id": "9f2c..."}}
    503 {"status": "degraded", ..., "store": {"ok": false, "id": "9f2c...", "error": "span store ...: ..."}}

The span store is asked on every call (one small query, in a thread, so the gateway keeps
serving meanwhile): a gateway whose store cannot be reached answers 503 ``degraded`` with the
reason, so that a load balancer stops sending it calls whose spans could not be recorded (each
of those calls would get a 503 too). A store that takes longer than ``timeout_s`` to answer
counts as down. One query runs at a time: calls that arrive meanwhile wait for it, so a balancer
polling through an outage does not pile up threads. ``store_id`` stays at the top level, as
before ``store`` existed: a trainer's replica check compares it with its own store's; while the
store is down it is the id last seen (None if never).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tracerl.core.store import SpanStore
from tracerl.engines.base import Engine

__all__ = ["StoreProbe"]


class StoreProbe:
    """Asks the store for its id; :meth:`answer` is /health's body and status code."""

    def __init__(self, store: SpanStore, timeout_s: float = 2.0):
        self.store, self.timeout_s = store, timeout_s
        self.last_id: str | None = None
        self._query: asyncio.Future[str | None] | None = None

    async def check(self) -> dict[str, Any]:
        """``{"ok": True, "id": ...}``, or ``{"ok": False, "id": last seen, "error": why}``."""
        if self._query is None or self._query.done():
            self._query = asyncio.ensure_future(asyncio.to_thread(self.store.store_id))
            self._query.add_done_callback(_retrieve)
        try:
            found = await asyncio.wait_for(asyncio.shield(self._query), self.timeout_s)
        except asyncio.TimeoutError:
            why = f"the span store {self.store.where} did not answer within {self.timeout_s:g} s"
            return {"ok": False, "id": self.last_id, "error": why}
        except Exception as exc:  # noqa: BLE001 - whatever the store raised is the reason, not a crash
            return {"ok": False, "id": self.last_id, "error": f"{type(exc).__name__}: {exc}"}
        self.last_id = found
        return {"ok": True, "id": found}

    async def answer(self, engine: Engine, accepts_weights: bool) -> tuple[dict[str, Any], int]:
        store = await self.check()
        doc = {"status": "ok" if store["ok"] else "degraded", "model": engine.model_name,
               "weight_version": engine.weight_version, "store_id": store["id"],
               "accepts_weights": accepts_weights, "store": store}
        return doc, 200 if store["ok"] else 503


def _retrieve(query: asyncio.Future[str | None]) -> None:
    """Mark a query's exception as seen: one that finished after /health stopped waiting would
    be logged as never retrieved."""
    if not query.cancelled():
        query.exception()
