"""Where a step's episodes come from: rolled out in line (sync), or ahead in a background
thread while the trainer updates (async), at most ``max_staleness`` weight versions behind.

Async trades freshness for overlap: the rollouts of step k+1 run on the weights of before
update k. The loss corrects for it with truncated importance sampling against the logprobs
the engine sampled with (``loss.tis_cap``); ``async/staleness_mean`` reports how far behind
the data was.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

from tracerl.core.types import Episode

Rollout = Callable[[int], list[Episode]]  # step -> that step's episodes


class Producer:
    """Iterate ``(step, episodes, rollout_seconds)`` for steps ``start..end-1``."""

    def __init__(self, rollout: Rollout, start: int, end: int, max_staleness: int):
        self.rollout, self.start, self.end = rollout, start, end
        self.max_staleness = max_staleness
        self._updates_done = start  # weight versions published by the trainer (= steps done)
        self._cond = threading.Condition()
        self._queue: queue.Queue[tuple[int, list[Episode], float] | BaseException] = queue.Queue()
        self._stop = False
        self._thread: threading.Thread | None = None

    def __iter__(self) -> Iterator[tuple[int, list[Episode], float]]:
        if self.max_staleness == 0:
            for step in range(self.start, self.end):
                t0 = time.perf_counter()
                episodes = self.rollout(step)
                yield step, episodes, time.perf_counter() - t0
            return
        self._thread = threading.Thread(target=self._produce, name="tracerl-rollouts", daemon=True)
        self._thread.start()
        for _ in range(self.start, self.end):
            item = self._queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item

    def updated(self, step: int) -> None:
        """The trainer finished the update of ``step``: rollouts may move one step further."""
        with self._cond:
            self._updates_done = step + 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _produce(self) -> None:
        try:
            for step in range(self.start, self.end):
                with self._cond:  # start step s once the update of step s - 1 - staleness landed
                    def ready(s: int = step) -> bool:
                        return self._stop or self._updates_done >= s - self.max_staleness

                    self._cond.wait_for(ready)
                    if self._stop:
                        return
                t0 = time.perf_counter()
                episodes = self.rollout(step)
                self._queue.put((step, episodes, time.perf_counter() - t0))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the trainer's thread
            self._queue.put(exc)
