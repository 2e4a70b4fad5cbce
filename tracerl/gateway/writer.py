"""Group commit: spans from concurrent requests share one SQLite transaction.

Each request hands its spans to :meth:`SpanWriter.write` and awaits them: the call returns
only once those spans are committed (or raises the store's error), so the gateway still
answers a client only after its span is stored. One writer thread drains whatever has queued
up while the previous transaction ran and commits it in one go, so under load N requests
cost one transaction instead of N, and the event loop never waits on SQLite. Should a
combined batch fail, each request's spans are retried alone so that one bad request fails
only itself.

The thread starts on the first write and ends after ``idle_s`` without work, so an app that
is dropped leaves no thread behind.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from tracerl.core.spans import SpanRecord
from tracerl.core.store import SpanStore

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    records: Sequence[SpanRecord]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # the request was cancelled (client gone); its spans are stored anyway
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class SpanWriter:
    """``await writer.write(records)`` returns once ``records`` are committed to ``store``."""

    def __init__(self, store: SpanStore, *, max_batch: int = 1024, idle_s: float = 2.0):
        self.store, self.max_batch, self.idle_s = store, max_batch, idle_s
        self._queue: queue.SimpleQueue[_Pending] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _running against a put racing the idle exit
        self._running = False
        self.transactions = 0  # commits made (a batching metric: requests / transactions)

    async def write(self, records: Sequence[SpanRecord]) -> None:
        if not records:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._queue.put(_Pending(records, loop, future))
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="tracerl-span-writer", daemon=True).start()
        await future

    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._running = False
                        return
                continue
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._commit(batch)

    def _commit(self, batch: list[_Pending]) -> None:
        errors: list[BaseException | None]
        try:
            self.store.add([r for item in batch for r in item.records])
            self.transactions += 1
            errors = [None] * len(batch)
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting request(s)
            errors = [exc] if len(batch) == 1 else [self._commit_one(item) for item in batch]
        for item, error in zip(batch, errors):
            try:
                item.loop.call_soon_threadsafe(_settle, item.future, error)
            except RuntimeError:  # that event loop is closed: nobody is waiting any more
                log.debug("span writer: the requesting event loop is gone")

    def _commit_one(self, item: _Pending) -> BaseException | None:
        try:
            self.store.add(item.records)
            self.transactions += 1
        except Exception as exc:  # noqa: BLE001
            return exc
        return None
