"""Gateway replicas: a run served by gateways it does not own (``tracerl train --gateway URL ...``).

Each replica is a ``tracerl gateway serve --accept-weights`` process with an engine of its own
(the bundled TorchEngine, or an ``--upstream`` vLLM server with ``--weight-sync disk``), and all
of them write the run's span store. The trainer pins each episode to one replica
(:func:`~tracerl.trainers.rollouts.run_rollouts`), and after each update :meth:`Replicas.update_weights`
sends the new weights to every replica at once and returns only when each has answered that
it serves them: the barrier by which one step's rollouts see one weight version. Rollouts
therefore never overlap the update here (``async_staleness`` 0).

Before the first rollout :meth:`Replicas.check` asks each replica's ``/health`` whether it is
up, takes the run's API key (``rollout.api_key``: ``/health`` needs none, ``/v1/models`` does),
takes weights, serves the model the agents ask for and writes this run's store (by the store's
id, whatever path or URL names it): a replica writing elsewhere would make every episode one
without LLM calls, found only after the run.
"""

from __future__ import annotations

import concurrent.futures
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from tracerl.core.errors import ConfigError, GatewayProcessError
from tracerl.core.store import SpanStore

__all__ = ["Replicas"]

START = "tracerl gateway serve --accept-weights --store <the run's store>"


class Replicas:
    """The engine the loop updates when gateways serve the run: ``update_weights`` reaches every one."""

    def __init__(self, urls: Sequence[str], *, api_key: str | None, store: SpanStore, model: str,
                 timeout_s: float = 600.0):
        self.urls = [u.rstrip("/").removesuffix("/v1") for u in urls]
        if len(set(self.urls)) != len(self.urls):
            raise ConfigError(f"--gateway names one gateway twice: {', '.join(self.urls)}")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.store, self.model, self.timeout_s = store, model, timeout_s
        self.weight_version = 0

    def check(self) -> None:
        """One line for the first replica that cannot serve this run, naming why and the fix."""
        import httpx

        ours = self.store.store_id()
        for url in self.urls:
            try:
                health = httpx.get(f"{url}/health", timeout=10.0).json()
            except (httpx.HTTPError, ValueError) as exc:
                raise ConfigError(f"--gateway {url}: no tracerl gateway answers there ({type(exc).__name__}: "
                                  f"{exc}); start one with `{START}`") from exc
            self._check_key(url)
            if health.get("status") == "degraded":
                why = (health.get("store") or {}).get("error")
                raise ConfigError(f"--gateway {url} cannot reach its span store ({why}), so nothing it serves "
                                  "would be recorded: start the store (or fix the gateway's --store) and run again")
            if not health.get("accepts_weights"):
                raise ConfigError(f"--gateway {url} takes no weights, so it would serve the same model all run: "
                                  f"restart it with `{START}`")
            if health.get("store_id") != ours:
                raise ConfigError(f"--gateway {url} writes another span store than this run's ({self.store.where}), "
                                  "so the run would find no LLM calls in its episodes: start it with --store "
                                  "naming the same store, or give the run its --store")
            if health.get("model") != self.model:
                raise ConfigError(f"--gateway {url} serves model {health.get('model')!r} and the run's agents ask "
                                  f"for {self.model!r}: start it with --name {self.model}, or "
                                  f"--set rollout.model={health.get('model')}")
        self.weight_version = 0

    def _check_key(self, url: str) -> None:
        """One line when ``url`` refuses the run's key (its ``/health`` needs none, so ask a route that
        does): else the first sign would be the weights' 401 after the first step."""
        import httpx

        from tracerl.core.rollout import RolloutSettings

        try:
            answer = httpx.get(f"{url}/v1/models", headers=self.headers, timeout=10.0)
        except httpx.HTTPError as exc:
            raise ConfigError(f"--gateway {url}: its /health answered but /v1/models did not ({type(exc).__name__}: "
                              f"{exc}); is it a tracerl gateway? start one with `{START}`") from exc
        if answer.status_code != 401:
            return
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if given in ("", RolloutSettings.model_fields["api_key"].default):
            raise ConfigError(f"--gateway {url} needs an API key (it was started with --api-key) and the run has "
                              "none (rollout.api_key is unset): set --set rollout.api_key=KEY, the gateway's --api-key")
        raise ConfigError(f"--gateway {url} refused the run's API key (rollout.api_key): set --set "
                          "rollout.api_key=KEY to the key the gateway was started with (its --api-key)")

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Send the weights to every replica at once; return when all serve ``version``."""
        from tracerl.engines import weights_file

        fd, path = tempfile.mkstemp(prefix="tracerl-weights-", suffix=".safetensors")
        os.close(fd)
        try:
            weights_file.save(state_dict, path)  # written once, read by one upload per replica
            with concurrent.futures.ThreadPoolExecutor(len(self.urls)) as pool:
                answers = list(pool.map(lambda url: self._send(url, path, version), self.urls))
        finally:
            os.unlink(path)
        failed = [why for why in answers if why]
        if failed:
            raise GatewayProcessError(f"weights {version} did not reach every gateway, so the next step would "
                                      f"mix weight versions: {'; '.join(failed)}")
        self.weight_version = int(version)

    def _send(self, url: str, path: str, version: int) -> str | None:
        """None once ``url`` serves ``version``; else why not."""
        import httpx

        try:
            with open(path, "rb") as body:
                response = httpx.post(f"{url}/admin/weights", params={"version": version}, content=body,
                                      headers=self.headers, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            return f"{url}: {type(exc).__name__}: {exc}"
        if response.status_code != 200:
            return f"{url} answered {response.status_code}: {response.text[:300]}"
        served = response.json().get("weight_version")
        if served != version:  # an upstream with weight sync off keeps its weights
            return f"{url} still serves weights {served} (is its upstream started with --weight-sync disk?)"
        return None
