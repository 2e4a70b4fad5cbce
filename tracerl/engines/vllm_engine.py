"""VLLMEngine: vLLM's async engine in-process behind the same interface ([gpu] extra).

vLLM pins its own torch and transformers, so it lives in its own environment
(``pip install 'tracerl[gpu]'``) and is never imported unless this engine is built. The
engine is asked for ``processed_logprobs``: the logprob of each sampled token under the
distribution it was drawn from (after temperature/top-k/top-p), as TorchEngine returns.

Colocated training (``engine: vllm``), per step: :meth:`sleep` before the update (level 2:
KV cache and weights freed, the update gets the memory), then :meth:`update_weights` wakes
the weights' memory only, loads the new weights, wakes the KV cache and resets the prefix
cache (vLLM's documented RLHF order; a level-2 sleeper must have every weight rewritten
before it serves, which a full state dict does). Weights travel with vLLM's weight-transfer
API over CUDA IPC where the installed vLLM has it (>= 0.21: ``start_weight_update`` /
``update_weights`` / ``finish_weight_update``; no copy, the workers read the trainer's
tensors), else by ``load_weights`` on each worker through ``collective_rpc``.

Written against vLLM 0.16-0.33's API as documented; it has not run here (no CUDA, and vLLM's
wheels cannot be carried to the GPU machine): tests/gpu/test_vllm_engine.py checks it where
vLLM is importable.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any

from tracerl.core.errors import MissingDependencyError

from .base import Generation, SamplingParams


def _vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError("vllm", "gpu", "VLLMEngine") from exc
    return vllm


def _load_weights(worker: Any, weights: list[tuple[str, Any]]) -> None:
    # Runs inside each vLLM worker (collective_rpc passes the worker first).
    worker.model_runner.model.load_weights(weights=weights)


def _has_weight_transfer(vllm: Any) -> bool:
    config = getattr(vllm, "config", None)
    return config is not None and hasattr(config, "WeightTransferConfig")


class VLLMEngine:
    def __init__(self, model: str, *, model_name: str | None = None, gpu_memory_utilization: float = 0.5,
                 max_model_len: int | None = None, seed: int = 0, enable_sleep_mode: bool = False,
                 **engine_kwargs: Any):
        vllm = _vllm()
        if _has_weight_transfer(vllm):
            engine_kwargs.setdefault("weight_transfer_config", {"backend": "ipc"})
        args = vllm.AsyncEngineArgs(
            model=model, gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
            seed=seed, logprobs_mode="processed_logprobs", enable_prefix_caching=True,
            enable_sleep_mode=enable_sleep_mode, **engine_kwargs,
        )
        self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
        # ipc: vLLM's weight-transfer API (0.21+); rpc: load_weights through collective_rpc
        self.weight_sync = "ipc" if "weight_transfer_config" in engine_kwargs and hasattr(
            self._engine, "start_weight_update") else "rpc"
        self._transfer_ready = False
        self._asleep = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the gateway's, where the engine runs
        self._vllm = vllm
        self.model_name = model_name or model
        self.weight_version = 0
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(model)
        self._max_context = int(max_model_len or self._engine.model_config.max_model_len)

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def max_context(self) -> int:
        return self._max_context

    def _params(self, p: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            n=p.n, temperature=p.temperature, top_p=p.top_p, top_k=p.top_k or -1, max_tokens=p.max_tokens,
            stop=list(p.stop) or None, seed=p.seed, logprobs=0,
            output_kind=self._vllm.sampling_params.RequestOutputKind.FINAL_ONLY,
        )

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> list[Generation]:
        self._loop = asyncio.get_running_loop()
        final = None
        version = self.weight_version
        async for out in self._engine.generate({"prompt_token_ids": prompt_ids}, self._params(params),
                                               request_id=uuid.uuid4().hex):
            final = out
        assert final is not None
        gens = []
        for o in final.outputs:
            ids = list(o.token_ids)
            # logprobs: one {token_id: Logprob} dict per position; the sampled token is always in it
            lps = [float(step[t].logprob) for t, step in zip(ids, o.logprobs or [])]
            finish = "length" if o.finish_reason == "length" else "stop"
            gens.append(Generation(ids, lps, finish, version, o.stop_reason))  # type: ignore[arg-type]
        return gens

    async def sleep_async(self) -> None:
        await self._engine.sleep(level=2)
        self._asleep = True

    async def update_weights_async(self, state_dict: dict[str, Any], version: int) -> None:
        if self._asleep:
            await self._engine.wake_up(tags=["weights"])  # weights' memory only: the KV cache after
        if self.weight_sync == "ipc":
            await self._send_ipc(state_dict)
        else:
            await self._engine.collective_rpc(_load_weights, args=(list(state_dict.items()),))
        if self._asleep:
            await self._engine.wake_up(tags=["kv_cache"])
            self._asleep = False
        await self._engine.reset_prefix_cache()
        self.weight_version = int(version)

    async def _send_ipc(self, state_dict: dict[str, Any]) -> None:
        import torch
        from torch.multiprocessing.reductions import reduce_tensor

        if not self._transfer_ready:
            await self._engine.init_weight_transfer_engine({"init_info": {}})
            self._transfer_ready = True
        uuid_ = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        # the workers read these tensors in place; CPU ones (gathered shards) are copied over once
        tensors = {k: v.detach() if v.is_cuda else v.detach().cuda() for k, v in state_dict.items()}
        info = {"names": list(tensors), "dtype_names": [str(t.dtype).removeprefix("torch.") for t in tensors.values()],
                "shapes": [list(t.shape) for t in tensors.values()],
                "ipc_handles": [{uuid_: reduce_tensor(t)[1]} for t in tensors.values()]}
        await self._engine.start_weight_update()
        await self._engine.update_weights({"update_info": info})
        await self._engine.finish_weight_update()
        torch.cuda.synchronize()

    def _run(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` on the loop the engine serves from (the gateway's thread), or here."""
        if self._loop is not None and self._loop.is_running():
            asyncio.run_coroutine_threadsafe(coro, self._loop).result()
        else:
            asyncio.run(coro)

    def sleep(self) -> None:
        """Free vLLM's GPU memory for the update; :meth:`update_weights` wakes it."""
        self._run(self.sleep_async())

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self._run(self.update_weights_async(state_dict, version))

    async def close(self) -> None:
        self._engine.shutdown()
