"""VLLMEngine: vLLM's async engine in-process behind the same interface ([gpu] extra).

vLLM pins its own torch and transformers, so it lives in its own environment
(``pip install 'tracerl[gpu]'``) and is never imported unless this engine is built. The
engine is asked for ``processed_logprobs``: the logprob of each sampled token under the
distribution it was drawn from (after temperature/top-k/top-p), as TorchEngine returns.
Weights are pushed from the trainer with ``update_weights`` (in-process load_weights on
every worker through ``collective_rpc``), after which the prefix cache is reset.
"""

from __future__ import annotations

import uuid
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


class VLLMEngine:
    def __init__(self, model: str, *, model_name: str | None = None, gpu_memory_utilization: float = 0.5,
                 max_model_len: int | None = None, seed: int = 0, **engine_kwargs: Any):
        vllm = _vllm()
        args = vllm.AsyncEngineArgs(
            model=model, gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
            seed=seed, logprobs_mode="processed_logprobs", enable_prefix_caching=True, **engine_kwargs,
        )
        self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
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

    async def update_weights_async(self, state_dict: dict[str, Any], version: int) -> None:
        weights = list(state_dict.items())
        await self._engine.collective_rpc(_load_weights, args=(weights,))
        await self._engine.reset_prefix_cache()
        self.weight_version = int(version)

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        import asyncio

        asyncio.run(self.update_weights_async(state_dict, version))

    async def close(self) -> None:
        self._engine.shutdown()
