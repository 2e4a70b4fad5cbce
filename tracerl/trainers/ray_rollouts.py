"""Rollouts on a Ray cluster: the user's rollout function in Ray actors instead of rank 0's threads.

Ray only places and supervises the agent processes (``--rollout-workers N [--ray-address ADDR]``,
the ``[ray]`` extra); one machine needs no Ray. Each worker is an actor that imports the agent by
its spec and runs episodes with :func:`tracerl.core.remote.run_here`, several at once in its
threads: its LLM calls reach the gateway over HTTP by the episode's session URL, its framework
spans go over OTLP to the gateway's ``/v1/traces``. Rank 0 assembles each episode from its store
and grades it (:func:`tracerl.core.remote.assemble`), so an episode is the same whichever process
ran it.

What a worker's failure costs:

* a worker that dies (its process exits, its node goes): the episodes it held, marked ``error``
  and counted (``rollout/worker_lost``); one that had made no LLM call yet is run again once, on
  another worker. Ray restarts the actor for the next episodes.
* a worker that hangs past the episode timeout (plus a grace): killed and restarted; its
  episodes are marked ``timeout``.

The step always completes.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracerl.core import semconv as sc
from tracerl.core.errors import ConfigError, require
from tracerl.core.grading import Grader
from tracerl.core.otel import Tracing
from tracerl.core.remote import RemoteEpisode, assemble, lost
from tracerl.core.rollout import RolloutSettings
from tracerl.core.store import SpanStore
from tracerl.core.types import Episode, Task, TerminationReason

log = logging.getLogger(__name__)
GRACE_S = 30.0  # past an episode's own timeout, before its worker counts as hung
CONNECT_TIMEOUT_S = 30.0  # TrainConfig.ray_connect_timeout_s's default


def _ray() -> Any:
    return require("ray", "ray", "ray", "--rollout-workers")


def check_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A :class:`ConfigError` within ``timeout_s`` when no Ray cluster answers at ``address``
    (``HOST:PORT`` of the head's GCS, or ``ray://HOST:PORT`` for Ray Client).

    ``ray.init(address=...)`` never gives up on a GCS that does not answer: its C++ client logs
    "Failed to connect to GCS ... within 5 seconds" (``RAY_gcs_rpc_server_connect_timeout_s``, a
    warning, not a limit) and tries again for good (Ray 2.60: over 10 minutes, no exception). A
    TCP connect to the host Ray dials says the same at once (refused) or within ``timeout_s``.
    """
    if address == "auto":
        return  # Ray finds this machine's cluster by its files, and says at once when there is none
    host, port = _host_port(address)
    dialled = host if address.startswith("ray://") else _dialled(host)  # Ray Client dials what it is given
    where = address if dialled == host else f"{address} (Ray dials it as {dialled}:{port})"
    try:
        socket.create_connection((dialled, port), timeout=timeout_s).close()
    except OSError as exc:
        why = (f"nothing answered within {timeout_s:g} s" if isinstance(exc, TimeoutError) else
               f"{host} is not a known host name" if isinstance(exc, socket.gaierror) else
               f"nothing answered: {exc.strerror or exc}")
        flag = "--ray-client-server-port" if address.startswith("ray://") else "--port"
        raise ConfigError(f"--ray-address {where}: no Ray cluster there ({why}); start one on that machine "
                          f"with `ray start --head {flag} {port}` (docs/scale.md), or pass the address "
                          "`ray start --head` printed") from None


def _host_port(address: str) -> tuple[str, int]:
    bare = address.removeprefix("ray://")
    host, _, port = bare.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address!r} is not HOST:PORT: pass the head's address as "
                          "`ray start --head` prints it (e.g. 10.0.0.5:6379), or 'auto' for this machine's cluster")
    return host, int(port)


def _dialled(host: str) -> str:
    """The host ``ray.init`` connects to for ``host``: in its multi-node mode (Linux's default) it
    replaces a loopback name by the address other machines reach this one by."""
    if host not in ("localhost", "127.0.0.1", "::1"):  # Ray's own test (services.resolve_ip_for_localhost)
        return host
    return str(_ray().util.get_node_ip_address())


class _Worker:
    """A Ray actor: the agent, and tracing that sends its spans to the gateway only."""

    def __init__(self, spec: str, otlp_endpoint: str):
        from tracerl.core.otel import setup_tracing
        from tracerl.core.remote import SpanCounter

        from .rollouts import load_agent

        self.agent = load_agent(spec)  # its adapter line runs here, on this process's provider
        self.tracing = setup_tracing(use_store=False, otlp_endpoint=otlp_endpoint)
        self.counter = SpanCounter()
        self.tracing.provider.add_span_processor(self.counter)  # after SessionSpanProcessor: sees the id

    def run(self, task: Task, settings: RolloutSettings, episode_id: str, kind: str, graded: bool) -> RemoteEpisode:
        from tracerl.core.remote import run_here

        report = run_here(self.agent, task, settings, episode_id, self.tracing, self.counter, graded=graded,
                          attributes={sc.EPISODE_KIND: kind})
        report.node = _ray().get_runtime_context().get_node_id()
        return report

    def pid(self) -> int:
        return os.getpid()


@dataclass
class _Job:
    index: int
    task: Task
    episode_id: str
    settings: RolloutSettings
    worker: int
    started: float
    attempt: int = 0
    killed: bool = False  # its worker was killed for hanging on it


class RayAgent:
    """Stands in for the rollout function where the trainer runs rollouts (``run_rollouts``):
    the same jobs, run on ``workers`` Ray actors; episodes come back assembled and graded."""

    is_async = False

    def __init__(self, spec: str, workers: int, *, gateway_url: str, store: SpanStore, concurrency: int,
                 address: str | None = None, timeout_s: float | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S):
        if address is not None:
            check_address(address, connect_timeout_s)
        elif "ray" not in sys.modules:
            # A cluster of this machine for this run listens on 127.0.0.1 only: Ray reads this at
            # import, and by default it binds every interface (its "multi-node" mode).
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = _ray()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            if address is None:  # a cluster of this machine, for this run
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                         object_store_memory=100 * 2**20)
            else:
                try:
                    ray.init(address=address, log_to_driver=False)
                except ConnectionError as exc:  # 'auto' and no cluster on this machine: Ray's own line
                    raise ConfigError(f"--ray-address {address}: {exc}") from None
        self.spec, self.store, self.timeout_s = spec, store, timeout_s
        # episodes are assembled (their spans awaited) and graded here, as many at once as the
        # threaded path runs: a reward function that calls a judge takes seconds an episode
        self._assembling = concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="tracerl-assemble")
        per_worker = max(1, -(-concurrency // workers))  # each actor's threads: episodes at once
        # A CPU each, held while it lives (an agent process keeps one busy), and SPREAD: the workers
        # over as many of the cluster's nodes as it has, not packed on the first
        actor = ray.remote(_Worker).options(max_restarts=-1, max_task_retries=0, max_concurrency=per_worker,
                                            num_cpus=1, scheduling_strategy="SPREAD")
        self.workers = [actor.remote(spec, f"{gateway_url.rstrip('/')}/v1/traces") for _ in range(workers)]
        try:  # every worker up (its agent imported) before the first step: an import error is one line now
            ray.get([w.pid.remote() for w in self.workers], timeout=300)
        except ray.exceptions.RayActorError as exc:
            raise ConfigError(f"--rollout-workers: a Ray worker could not start the agent {spec}: "
                              f"{str(exc).strip().splitlines()[-1][:500]}") from exc
        self.quiet = False
        self.lost = 0  # episodes lost to dead or hung workers, since the last look (see take_metrics)
        self.nodes: set[str] = set()  # the Ray nodes that ran an episode, since the last look

    def close(self) -> None:
        ray = _ray()
        self._assembling.shutdown(wait=False, cancel_futures=True)
        for w in self.workers:
            ray.kill(w)
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()

    def take_metrics(self) -> dict[str, float]:
        metrics = {"rollout/worker_lost": float(self.lost), "rollout/worker_nodes": float(len(self.nodes))}
        self.lost, self.nodes = 0, set()
        return metrics

    def run_many(self, jobs: Sequence[tuple[Task, str, RolloutSettings]], tracing: Tracing, reward: Any,
                 kind: str) -> list[Episode]:
        ray = _ray()
        grader = Grader.of(reward) if reward is not None else None
        pending: dict[Any, _Job] = {}
        out: list[Episode | concurrent.futures.Future[Episode] | None] = [None] * len(jobs)
        for i, (task, eid, settings) in enumerate(jobs):
            self._submit(pending, _Job(i, task, eid, settings, i % len(self.workers), 0.0), grader is not None, kind)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    report = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                        ray.exceptions.TaskCancelledError) as exc:
                    self._failed(pending, out, job, exc, tracing, grader is not None, kind)
                    continue
                if report.node:
                    self.nodes.add(report.node)
                out[job.index] = self._assembling.submit(assemble, report, job.task, job.settings, tracing,
                                                         self.store, grader, kind=kind)
            self._kill_hung(pending)
        return [ep.result() if isinstance(ep, concurrent.futures.Future) else ep for ep in out if ep is not None]

    def _submit(self, pending: dict[Any, _Job], job: _Job, graded: bool, kind: str) -> None:
        settings = job.settings.model_copy(update={"store": None})  # the worker's spans leave over OTLP
        job.started = time.monotonic()
        ref = self.workers[job.worker].run.remote(job.task, settings, job.episode_id, kind, graded)
        pending[ref] = job

    def _failed(self, pending: dict[Any, _Job], out: list[Any], job: _Job, exc: BaseException,
                tracing: Tracing, graded: bool, kind: str) -> None:
        """A job whose worker died or was killed: run again once where it made no LLM call yet."""
        hung = job.killed
        if job.attempt == 0 and not hung and not self._called(job.episode_id):
            job.attempt, job.worker = 1, (job.worker + 1) % len(self.workers)
            self._submit(pending, job, graded, kind)
            return
        self.lost += 1
        why = "hung past its timeout and was killed" if hung else "died"
        if not self.quiet:
            log.warning("episode %s: its rollout worker %s (%s); the episode is dropped from the step",
                        job.episode_id, why, type(exc).__name__)
        out[job.index] = lost(job.task, job.episode_id, f"rollout worker {why}: {type(exc).__name__}", kind,
                              tracing, job.settings,
                              TerminationReason.TIMEOUT if hung else TerminationReason.ERROR)

    def _called(self, episode_id: str) -> bool:
        """Whether the episode made an LLM call (the gateway stores its span before it answers)."""
        return any(r.attributes.get(sc.SOURCE) == "gateway" for r in self.store.spans(session_id=episode_id))

    def _limit(self) -> float:
        return (self.timeout_s or 300.0) + GRACE_S

    def _kill_hung(self, pending: dict[Any, _Job]) -> None:
        ray = _ray()
        now = time.monotonic()
        hung = [job for job in pending.values() if not job.killed and now - job.started > self._limit()]
        for worker in {job.worker for job in hung}:
            log.warning("rollout worker %d: an episode ran past %.0f s; restarting the worker", worker, self._limit())
            ray.kill(self.workers[worker], no_restart=False)  # its calls fail; Ray starts it again
        for job in hung:
            job.killed = True
