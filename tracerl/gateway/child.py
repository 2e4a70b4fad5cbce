"""The gateway and its TorchEngine in a child process, for training with overlap.

In one process, rollouts (the engine's forward passes and the agents' HTTP and framework
code) and the policy update share one interpreter lock and compete for it; measured on 2
cores, overlapping them (``async_staleness=1``) bought nothing: the update slowed from 27 s
to 96 s. In a child process the engine runs on its own core and its own interpreter.

    with GatewayProcess("path/to/model", "run/traces.db", log_path="run/gateway.log") as gw:
        ...  # agents call gw.url
        gw.update_weights(model.state_dict(), version=1)

The child is ``python -m tracerl.gateway.child`` (a plain subprocess, not multiprocessing:
spawning would re-run an unguarded user script). It writes spans to the same SQLite store as
the trainer (WAL: several writers are fine). Control is JSON lines on its stdin/stdout:
``{"op": "weights", "path": ..., "version": n}`` loads weights the trainer saved to a file
(``torch.save``: tied weights are kept shared) and answers once the engine uses them, so
spans stamped with version n come from weights n. When the trainer dies, the child's stdin
closes and it exits.

Weights cross through a file every step: ~25 ms for the bundled model, seconds for a model of
billions of parameters, which is CPU-scale use; on GPUs the vLLM engine is the way to serve.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from tracerl.core.errors import ConfigError, GatewayProcessError

__all__ = ["GatewayProcess", "GatewayProcessError"]


def _shm_dir() -> str | None:
    # Weights cross through a file: in memory when the machine has a tmpfs for it.
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class GatewayProcess:
    """A :class:`~tracerl.gateway.server.GatewayServer` with a TorchEngine, in a child process."""

    def __init__(self, model: str | Path, store: str | Path, *, model_name: str | None = None,
                 device: str | None = None, dtype: str = "auto", max_batch_size: int = 64,
                 num_threads: int | None = None,
                 log_path: str | Path | None = None, start_timeout_s: float = 300.0):
        self.args = {"model": str(model), "store": str(store), "model_name": model_name, "device": device,
                     "dtype": dtype, "max_batch_size": max_batch_size, "num_threads": num_threads}
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkdtemp()) / "gateway.log"
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._lock = threading.Lock()

    def start(self) -> GatewayProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "a")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tracerl.gateway.child", json.dumps(self.args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1,
        )
        try:
            self.url = self._reply(self.start_timeout_s)["url"]
        except BaseException:
            self.stop()
            raise
        return self

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Hand the engine new weights; returns once generations carry ``version``."""
        import torch

        fd, path = tempfile.mkstemp(prefix="tracerl-weights-", suffix=".pt", dir=_shm_dir())
        os.close(fd)
        try:
            torch.save(state_dict, path)
            with self._lock:
                self._send({"op": "weights", "path": path, "version": int(version)})
                self._reply(600.0)
        finally:
            if os.path.exists(path):
                os.unlink(path)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # the child's cue to shut down
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the pipe ---------------------------------------------------------------------

    def _send(self, doc: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(doc) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def _reply(self, timeout_s: float) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(self._proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            self._proc.kill()
            raise GatewayProcessError(f"the gateway process did not answer in {timeout_s:.0f} s "
                                      f"and was killed; its log: {self.log_path}")
        if not out or not out[0]:
            raise self._died()
        doc = json.loads(out[0])
        if "error" in doc:
            raise GatewayProcessError(f"the gateway process failed: {doc['error']} (log: {self.log_path})")
        return doc

    def _died(self) -> GatewayProcessError:
        assert self._proc is not None
        code = self._proc.wait(timeout=30)
        tail = ""
        if self.log_path.exists():
            lines = [x for x in self.log_path.read_text(errors="replace").splitlines() if x.strip()]
            tail = lines[-1] if lines else ""
        return GatewayProcessError(f"the gateway process exited with code {code}"
                                   + (f": {tail}" if tail else "") + f" (log: {self.log_path})")


def _serve(args: dict[str, Any]) -> int:
    import torch
    from transformers.utils import logging as hf_logging

    from tracerl.engines.torch_engine import TorchEngine

    from .server import GatewayServer

    # The protocol owns the real stdout; anything a library prints goes to the log instead.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def answer(doc: dict[str, Any]) -> None:
        proto.write(json.dumps(doc) + "\n")
        proto.flush()

    hf_logging.disable_progress_bar()
    try:
        engine = TorchEngine(args["model"], model_name=args["model_name"], device=args["device"],
                             dtype=args.get("dtype", "auto"), max_batch_size=args["max_batch_size"], num_threads=args["num_threads"])
        gateway = GatewayServer(engine, args["store"]).start()
    except (ConfigError, OSError, ValueError) as exc:
        answer({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    answer({"url": gateway.url})
    try:
        for line in sys.stdin:  # ends when the trainer closes the pipe, or dies
            msg = json.loads(line)
            if msg.get("op") != "weights":
                answer({"error": f"unknown op {msg.get('op')!r}"})
                continue
            try:
                state = torch.load(msg["path"], map_location=engine.device, weights_only=True)
                engine.update_weights(state, int(msg["version"]))
            except Exception as exc:  # noqa: BLE001 - reported to the trainer, which raises
                answer({"error": f"loading weights: {type(exc).__name__}: {exc}"})
                continue
            answer({"ok": True, "version": engine.weight_version})
    finally:
        gateway.stop()
        engine.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(json.loads(sys.argv[1])))
