"""VLLMEngine: vLLM's async engine in-process behind the same interface ([gpu] extra).

vLLM pins its own torch and transformers, so it lives in its own environment
(``pip install 'tracerl[gpu]'``) and is never imported unless this engine is built. The
engine is asked for ``processed_logprobs``: the logprob of each sampled token under the
distribution it was drawn from (after temperature/top-k/top-p), as TorchEngine returns.

Checked against vLLM 0.33's source, the only release supported (:data:`SUPPORTED`; widen it
only after ``bench/vllm_contract.py`` passes on the newer one). What that source dictates:

* **One event loop.** ``AsyncLLM`` talks to its engine-core process through a client whose
  output reader is bound, once, to the first running loop (``AsyncMPClient.
  _ensure_output_queue_task``; ``AsyncLLM._run_output_handler``); neither is ever restarted,
  so a loop that closes leaves the engine dead. The engine gets a thread running a loop of
  its own, is built inside it, and every coroutine (generation from the gateway's loop, the
  trainer's sleep and weight updates) is sent there.
* **Weights over CUDA IPC** with vLLM's weight-transfer API: ``init_weight_transfer_engine(
  WeightTransferInitRequest)``, then per update ``start_weight_update()``, one
  ``update_weights(WeightTransferUpdateRequest)`` per bucket of at most ``bucket_bytes``,
  ``finish_weight_update()``. The workers rebuild each tensor from its handle in place (no
  copy of the trainer's GPU tensors; CPU ones are copied over a bucket at a time). IPC
  handles hold classes and dtypes, which vLLM's msgpack encoder passes only with
  ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``, set before the engine-core process starts (as
  vLLM's own RLHF IPC example does; the channel is the machine-local one between this
  process and its engine core). The fallback the older code had, ``collective_rpc`` with a
  function and tensors, cannot work: tensors reach the engine core as plain lists.
* **Colocated training** (``engine: vllm``), per step: :meth:`sleep` before the update
  (level 2: KV cache and weights freed; ``mode="wait"``, so a straggling request finishes
  rather than being aborted), then :meth:`update_weights` empties this process's CUDA cache,
  wakes the weights' memory only, sends the weights, wakes the KV cache (which resumes the
  scheduler) and resets the prefix cache (vLLM's documented RLHF order; a level-2 sleeper
  must have every weight rewritten, which a full state dict does).

It has not run on a GPU yet: tests/gpu/test_vllm_engine.py checks it where vLLM is
importable, and bench/vllm_contract.py checks every call against vLLM's source on a CPU.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from tracerl.core.errors import ConfigError, MissingDependencyError

from .base import Generation, SamplingParams

log = logging.getLogger(__name__)
SUPPORTED = (0, 33)  # vLLM major.minor whose source this engine was checked against
SUPPORTED_RANGE = "vllm>=0.33,<0.34"
INSECURE_SERIALIZATION = "VLLM_ALLOW_INSECURE_SERIALIZATION"
_T = TypeVar("_T")


def check_version(version: str) -> None:
    """One line naming the supported range for any other vLLM."""
    try:
        found = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        found = ()
    if found != SUPPORTED:
        raise ConfigError(f"vLLM {version} is installed, and tracerl's vLLM engine is checked against "
                          f"{SUPPORTED_RANGE} only (bench/vllm_contract.py): pip install '{SUPPORTED_RANGE}', "
                          "or use --engine torch")


def _vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError("vllm", "gpu", "VLLMEngine") from exc
    check_version(vllm.__version__)
    return vllm


def buckets(state_dict: Mapping[str, Any], limit_bytes: int) -> Iterator[list[tuple[str, Any]]]:
    """The tensors of ``state_dict`` in order, in runs of at most ``limit_bytes`` (a tensor
    larger than that is a run of its own): what one ``update_weights`` call carries, so the
    copies made to send it stay bounded."""
    run: list[tuple[str, Any]] = []
    size = 0
    for name, tensor in state_dict.items():
        nbytes = tensor.numel() * tensor.element_size()
        if run and size + nbytes > limit_bytes:
            yield run
            run, size = [], 0
        run.append((name, tensor))
        size += nbytes
    if run:
        yield run


def ipc_update_info(named: list[tuple[str, Any]], handles: list[Any]) -> dict[str, Any]:
    """vLLM's ``IPCWeightTransferUpdateInfo`` (unpacked) as the dict its engine core decodes:
    per tensor its name, dtype name, shape and handle (``{GPU uuid: reduce_tensor args}``)."""
    return {"names": [n for n, _ in named],
            "dtype_names": [str(t.dtype).removeprefix("torch.") for _, t in named],
            "shapes": [list(t.shape) for _, t in named], "ipc_handles": handles}


def engine_args(model: str, **settings: Any) -> Any:
    """vLLM's ``AsyncEngineArgs`` for a training engine: processed logprobs, prefix caching, the
    IPC weight transfer, and ``settings`` (gpu_memory_utilization, enable_sleep_mode, ...)."""
    from vllm.config.weight_transfer import WeightTransferConfig
    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs(model=model, logprobs_mode="processed_logprobs", enable_prefix_caching=True,
                           weight_transfer_config=WeightTransferConfig(backend="ipc"), **settings)


class VLLMEngine:
    def __init__(self, model: str, *, model_name: str | None = None, gpu_memory_utilization: float = 0.5,
                 max_model_len: int | None = None, seed: int = 0, enable_sleep_mode: bool = False,
                 bucket_bytes: int = 1 << 30, timeout_s: float = 600.0, **engine_kwargs: Any):
        _vllm()
        if os.environ.get(INSECURE_SERIALIZATION, "1").strip().lower() in ("0", "false", "no", "off", ""):
            raise ConfigError(f"{INSECURE_SERIALIZATION} is set off, and the weight transfer's CUDA IPC handles "
                              "pass vLLM's engine-core channel only with it on; unset it")
        os.environ[INSECURE_SERIALIZATION] = "1"  # before the engine-core process starts: it inherits it
        args = engine_args(model, gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                           seed=seed, enable_sleep_mode=enable_sleep_mode, **engine_kwargs)
        self.bucket_bytes, self.timeout_s = bucket_bytes, timeout_s
        self._asleep = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tracerl-vllm", daemon=True)
        self._thread.start()
        self._engine: Any = None
        try:
            self._engine = self._call(self._start(args))
        except BaseException:
            self.shutdown()
            raise
        self.model_name = model_name or model
        self.weight_version = 0
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(model)
        self._max_context = int(max_model_len or self._engine.model_config.max_model_len)

    async def _start(self, args: Any) -> Any:
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest
        from vllm.v1.engine.async_llm import AsyncLLM

        # built inside the engine's loop: its output handler and its client's reader live here
        engine = AsyncLLM.from_engine_args(args)

        await engine.init_weight_transfer_engine(WeightTransferInitRequest(init_info={"packed": False}))
        return engine

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the engine's loop from any other thread; wait at most ``timeout_s``."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout_s)

    async def _on_loop(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Await ``coro`` from another loop (the gateway's): it runs on the engine's loop;
        cancelling the caller cancels it there (vLLM then aborts the request)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def max_context(self) -> int:
        return self._max_context

    @staticmethod
    def sampling_params(p: SamplingParams) -> Any:
        """vLLM's SamplingParams for ours: only the sampled token's logprob, the final output only."""
        from vllm.sampling_params import RequestOutputKind
        from vllm.sampling_params import SamplingParams as VLLMSamplingParams

        return VLLMSamplingParams(
            n=p.n, temperature=p.temperature, top_p=p.top_p, top_k=p.top_k or -1, max_tokens=p.max_tokens,
            stop=list(p.stop) or None, seed=p.seed, logprobs=0, output_kind=RequestOutputKind.FINAL_ONLY,
        )

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> list[Generation]:
        return await self._on_loop(self._generate(prompt_ids, params))

    async def _generate(self, prompt_ids: list[int], params: SamplingParams) -> list[Generation]:
        from vllm.inputs import tokens_input

        final = None
        version = self.weight_version
        async for out in self._engine.generate(tokens_input(prompt_ids), self.sampling_params(params),
                                               request_id=uuid.uuid4().hex):
            final = out
        assert final is not None
        gens = []
        for o in final.outputs:
            ids = list(o.token_ids)
            # logprobs: one {token_id: Logprob} per position; the sampled token is always in it
            lps = [float(step[t].logprob) for t, step in zip(ids, o.logprobs or [])]
            finish = "length" if o.finish_reason == "length" else "stop"
            gens.append(Generation(ids, lps, finish, version, o.stop_reason))  # type: ignore[arg-type]
        return gens

    async def _sleep(self) -> None:
        await self._engine.sleep(level=2, mode="wait")
        self._asleep = True

    async def _update(self, state_dict: Mapping[str, Any], version: int) -> None:
        import torch

        if self._asleep:
            # the update's cached blocks back to the driver before vLLM's process maps its weights
            torch.cuda.empty_cache()
            await self._engine.wake_up(tags=["weights"])  # weights' memory only: the KV cache after
        await self._send(state_dict, version)
        if self._asleep:
            await self._engine.wake_up(tags=["kv_cache"])  # fully awake: the scheduler resumes
            self._asleep = False
        if not await self._engine.reset_prefix_cache():
            # a request is running (rollouts overlapping the update): vLLM keeps the cache then,
            # and the old weights' cached prefixes would serve the new ones; recompute them
            log.debug("vLLM: requests running during the weight update; resetting their cache too")
            await self._engine.reset_prefix_cache(reset_running_requests=True)
        self.weight_version = int(version)

    async def _send(self, state_dict: Mapping[str, Any], version: int) -> None:
        import torch
        from torch.multiprocessing.reductions import reduce_tensor
        from vllm.distributed.weight_transfer.base import WeightTransferUpdateRequest

        await self._engine.start_weight_update()
        for run in buckets(state_dict, self.bucket_bytes):
            # the workers read these tensors in place; CPU ones (gathered shards) are copied over
            named = [(n, t.detach() if t.is_cuda else t.detach().cuda()) for n, t in run]
            torch.cuda.synchronize()  # the optimizer's writes (and the copies) done before they read
            handles = [{str(torch.cuda.get_device_properties(t.device).uuid): reduce_tensor(t)[1]} for _, t in named]
            await self._engine.update_weights(WeightTransferUpdateRequest(update_info=ipc_update_info(named, handles)))
            del named, handles  # the workers loaded them: this bucket's copies and handles can go
            torch.cuda.ipc_collect()
        await self._engine.finish_weight_update(weight_version=str(version))

    def sleep(self) -> None:
        """Free vLLM's GPU memory for the update; :meth:`update_weights` wakes it."""
        self._call(self._sleep())

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self._call(self._update(state_dict, version))

    async def update_weights_async(self, state_dict: dict[str, Any], version: int) -> None:
        await self._on_loop(self._update(state_dict, version))

    def shutdown(self) -> None:
        """Stop vLLM's engine-core process and the engine's loop (idempotent)."""
        if self._engine is not None:
            engine, self._engine = self._engine, None

            async def stop() -> None:
                engine.shutdown()  # cancels its output handler: on the loop that owns it

            self._call(stop())
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)

    async def close(self) -> None:
        self.shutdown()
