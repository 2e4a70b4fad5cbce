"""TorchEngine: any Hugging Face causal LM on CPU or GPU, with dynamic batching.

Requests arriving within a short window (``batch_window_ms``) are generated together in one
left-padded batch with a KV cache, so concurrent agents share forward passes instead of
queueing. Each row keeps its own sampling parameters and random generator; the logprob
returned for a token is taken from the distribution it was actually drawn from
(temperature, then top-k, then top-p), which is what PPO/GRPO ratios need. Greedy rows
(temperature 0) report the model's plain (temperature 1) logprobs.

Two ways to decode a batch. The dynamic one (the CPU default) grows a DynamicCache and drops
finished rows from it. The static one (``static_cache=True``, the CUDA default) preallocates a
StaticCache for the batch (rows padded to a power of two, length to a multiple of 256), keeps
finished rows in it, and runs every decode step with the same shapes, so on CUDA the step is
compiled once per (rows, length) with ``torch.compile(mode="reduce-overhead")`` (CUDA graphs):
a 64-row step then costs about the GPU time of one forward, not a Python loop's kernel launches.
Both give the same tokens and logprobs (tests/test_tiny_model.py compares them on CPU; the
compiled CUDA path is measured by bench/gpu_step.py, which has not run on a GPU yet).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracerl.core.errors import TracerlError

from .base import Generation, SamplingParams

log = logging.getLogger(__name__)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        from tracerl.core.errors import MissingDependencyError

        raise MissingDependencyError("torch", "train", "TorchEngine") from exc
    return torch


SMALL_MODEL_PARAMS = 50_000_000  # below this, CPU generation runs on one intra-op thread


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: concurrent.futures.Future[list[Generation]]


@dataclass
class _Row:
    request: _Request
    index: int  # sample number within the request (n > 1)
    rng: random.Random  # one uniform per sampled token: reproducible per seed, whatever the batch
    tokens: list[int]
    logprobs: list[float]
    limit: int
    done: bool = False
    finish: str = "length"
    stop_reason: str | int | None = None


class TorchEngine:
    """``TorchEngine()`` serves the bundled tiny model; pass a path or hub id for another."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        model_name: str | None = None,
        device: str | None = None,
        dtype: str = "auto",
        max_batch_size: int = 32,
        batch_window_ms: float = 5.0,
        max_context: int | None = None,
        num_threads: int | None = None,
        static_cache: bool | None = None,
    ):
        """``num_threads``: intra-op threads of the generation thread (default: torch's
        choice, or 1 for models under 50M parameters on CPU). ``static_cache``: decode with
        a preallocated cache and fixed shapes (default: on CUDA, compiled)."""
        torch = _torch()
        self.num_threads = num_threads
        from transformers import AutoTokenizer

        if model is None:
            from tracerl.models import tiny_model_path

            model = tiny_model_path()
        self.model_path = str(model)
        self.model_name = model_name or (
            "tracerl-tiny" if str(model) == _default_path() else Path(str(model)).name
        )
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = None if dtype == "auto" else getattr(torch, dtype)
        self.model: Any = load_causal_lm(self.model_path, torch_dtype)
        self.model.to(self.device)
        self.model.eval()
        if num_threads is None and self.device == "cpu" and self.model.num_parameters() < SMALL_MODEL_PARAMS:
            # Matrices this small gain nothing from more threads, and when the gateway, the
            # agents and a trainer share the cores, OpenMP's spinning barriers cost 10-20x
            # (measured: 0.43 s vs 10 s for one batch of 64 on 2 busy cores).
            self.num_threads = 1
        self._tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        cfg = self.model.config
        self._max_context = max_context or int(getattr(cfg, "max_position_embeddings", 2048))
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self._tokenizer.eos_token_id is not None:
            eos_ids.add(self._tokenizer.eos_token_id)
        self.eos_ids = frozenset(eos_ids)
        pad = self._tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else next(iter(self.eos_ids), 0)
        # transformers 5.2x renamed past_key_values to cache; support both.
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.static_cache = self.device.startswith("cuda") if static_cache is None else static_cache
        self._static: dict[tuple[int, int], Any] = {}  # (rows, length) -> StaticCache, reused
        self._decode: Any = None  # the compiled decode step (CUDA), made on first use
        self.weight_version = 0
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_ms / 1000
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._weights_lock = threading.Lock()
        self._seed_rng = torch.Generator().manual_seed(int(time.time_ns() % 2**31))
        self.batches = 0  # generation batches run, their rows, and seconds spent in them (metrics)
        self.rows = 0
        self.busy_s = 0.0
        self._thread = threading.Thread(target=self._loop, name="tracerl-torch-engine", daemon=True)
        self._thread.start()

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def max_context(self) -> int:
        return self._max_context

    # -- public API -------------------------------------------------------------------

    def submit(self, prompt_ids: list[int], params: SamplingParams) -> concurrent.futures.Future[list[Generation]]:
        if not prompt_ids:
            raise ValueError("prompt_ids is empty")
        if len(prompt_ids) >= self._max_context:
            raise ValueError(f"prompt has {len(prompt_ids)} tokens; the context holds {self._max_context}")
        fut: concurrent.futures.Future[list[Generation]] = concurrent.futures.Future()
        self._queue.put(_Request(list(prompt_ids), params, fut))
        return fut

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> list[Generation]:
        return await asyncio.wrap_future(self.submit(prompt_ids, params))

    def generate_sync(self, prompt_ids: list[int], params: SamplingParams) -> list[Generation]:
        return self.submit(prompt_ids, params).result()

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Swap in new weights between batches; generations after this carry ``version``."""
        with self._weights_lock:
            self.model.load_state_dict(state_dict, strict=True)
            self.weight_version = int(version)

    async def close(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30)

    # -- the batching loop ------------------------------------------------------------

    def _collect(self, first: _Request) -> list[_Request]:
        batch, rows = [first], first.params.n
        deadline = time.monotonic() + self.batch_window_s
        while rows < self.max_batch_size:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                break
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # shut down after this batch
                break
            batch.append(item)
            rows += item.params.n
        return batch

    def _loop(self) -> None:
        if self.num_threads:  # intra-op threads are per calling thread: set them here
            _torch().set_num_threads(self.num_threads)
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = self._collect(first)
            live = [r for r in batch if r.future.set_running_or_notify_cancel()]
            if not live:
                continue
            try:
                with self._weights_lock:
                    results = self._run(live)
                for req, gens in zip(live, results):
                    req.future.set_result(gens)
            except Exception as exc:  # a bad batch fails its requests, never the engine
                log.exception("generation batch failed")
                for req in live:
                    if not req.future.done():
                        req.future.set_exception(exc)

    def _rows(self, batch: list[_Request]) -> list[_Row]:
        torch = _torch()
        rows = []
        for req in batch:
            p = req.params
            room = self._max_context - len(req.prompt_ids)
            for i in range(p.n):
                seed = p.seed + i if p.seed is not None else int(torch.randint(0, 2**31, (1,), generator=self._seed_rng))
                rows.append(_Row(req, i, random.Random(seed), [], [], limit=max(1, min(p.max_tokens, room))))
        return rows

    def _run(self, batch: list[_Request]) -> list[list[Generation]]:
        start = time.perf_counter()
        self.batches += 1
        rows = self._rows(batch)
        self.rows += len(rows)
        try:
            (self._decode_static if self.static_cache else self._decode_dynamic)(rows)
        finally:
            self.busy_s += time.perf_counter() - start
        results: list[list[Generation]] = [[] for _ in batch]
        index = {id(req): k for k, req in enumerate(batch)}
        for r in rows:
            results[index[id(r.request)]].append(
                Generation(r.tokens, r.logprobs, r.finish, self.weight_version, r.stop_reason)  # type: ignore[arg-type]
            )
        return results

    def _padded(self, prompts: list[list[int]]) -> tuple[Any, Any]:
        """Left-padded ids and attention mask [B, width]: every row ends at the same column."""
        torch = _torch()
        width = max(map(len, prompts))
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            attn[i, width - len(p):] = 1
        return ids.to(self.device), attn.to(self.device)

    def _decode_dynamic(self, rows: list[_Row]) -> None:
        torch = _torch()
        prompts = [r.request.prompt_ids for r in rows]
        ids, attn = self._padded(prompts)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            cache, logits = self._forward(ids, attn, pos, None)  # logits: [B, V]
            active = rows  # rows still generating, in cache order
            while True:
                next_ids = self._sample_step(active, logits)  # [b]
                keep = [i for i, r in enumerate(active) if not r.done]
                if not keep:
                    break
                if len(keep) < len(active):  # drop finished rows from the batch and its cache
                    index = torch.tensor(keep, device=attn.device)
                    cache.batch_select_indices(index)
                    active = [active[i] for i in keep]
                    attn, pos, next_ids = attn[index], pos[index], next_ids[index]
                attn = torch.cat([attn, attn.new_ones((len(active), 1))], dim=1)
                pos = pos[:, -1:] + 1
                cache, logits = self._forward(next_ids[:, None], attn, pos, cache)

    def _decode_static(self, rows: list[_Row]) -> None:
        torch = _torch()
        size = 1 << (len(rows) - 1).bit_length()  # a power of two: few shapes, few graphs
        prompts = [r.request.prompt_ids for r in rows] + [[self.pad_id]] * (size - len(rows))
        ids, attn = self._padded(prompts)
        width = ids.shape[1]
        length = -(-(width + max(r.limit for r in rows)) // 256) * 256
        full = torch.ones((size, length), dtype=torch.long, device=ids.device)  # generated positions: 1
        full[:, :width] = attn
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():  # the cache's tensors are inference tensors: reset them in here
            cache = self._static_cache(size, length)
            # the cache counts the positions it has filled itself (transformers 5.2x: no cache_position)
            logits = self._step(ids, full, pos, cache, compiled=False)
            pos = pos[:, -1:]
            for _ in range(length - width):
                live = [i for i, r in enumerate(rows) if not r.done]
                index = torch.tensor(live, device=ids.device)
                next_ids = torch.full((size,), self.pad_id, dtype=torch.long, device=ids.device)
                next_ids[index] = self._sample_step([rows[i] for i in live], logits[index])
                if all(r.done for r in rows):
                    break
                pos = pos + 1
                logits = self._step(next_ids[:, None], full, pos, cache, compiled=True)

    def _static_cache(self, size: int, length: int) -> Any:
        from transformers import StaticCache

        cache = self._static.pop((size, length), None)
        if cache is None:
            cache = StaticCache(config=self.model.config, max_cache_len=length)
        else:
            cache.reset()
        self._static[(size, length)] = cache  # the newest last; memory for the four newest shapes
        while len(self._static) > 4:
            self._static.pop(next(iter(self._static)))
        return cache

    def _step(self, ids: Any, mask: Any, pos: Any, cache: Any, compiled: bool) -> Any:
        """Last-position logits [B, V] of one forward into the static cache."""
        forward = self.model.forward
        if compiled and self.device.startswith("cuda"):
            if self._decode is None:
                self._decode = _torch().compile(self.model.forward, mode="reduce-overhead", fullgraph=False)
            forward = self._decode
        out = forward(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                      **{self._cache_kw: cache})
        return out.logits[:, -1, :].float()

    def _forward(self, ids: Any, attn: Any, pos: Any, cache: Any) -> tuple[Any, Any]:
        """One forward pass with the KV cache; returns (cache, last-position logits [B, V])."""
        kwargs = {"input_ids": ids, "attention_mask": attn, "position_ids": pos, "use_cache": True,
                  "logits_to_keep": 1}
        if cache is not None:
            kwargs[self._cache_kw] = cache
        out = self.model(**kwargs)
        new_cache = out.cache if self._cache_kw == "cache" else out.past_key_values
        return new_cache, out.logits[:, -1, :].float()

    def _sample_step(self, rows: list[_Row], logits: Any) -> Any:
        """One token per row ([B] ids), sampled in batches of rows with equal parameters."""
        torch = _torch()
        next_ids = torch.empty((len(rows),), dtype=torch.long, device=logits.device)
        groups: dict[tuple[float, int, float], list[int]] = {}
        for i, r in enumerate(rows):
            p = r.request.params
            groups.setdefault((p.temperature, p.top_k, p.top_p), []).append(i)
        for members in groups.values():
            index = torch.tensor(members, device=logits.device)
            params = rows[members[0]].request.params
            uniforms = [rows[i].rng.random() for i in members]
            tokens, logprobs = sample_tokens(logits[index], params, uniforms)
            next_ids[index] = tokens
            for i, token, logprob in zip(members, tokens.tolist(), logprobs.tolist()):
                r = rows[i]
                r.tokens.append(token)
                r.logprobs.append(logprob)
                self._check_done(r, token)
        return next_ids

    def _check_done(self, r: _Row, token: int) -> None:
        if token in self.eos_ids:
            r.done, r.finish, r.stop_reason = True, "stop", token
        elif r.request.params.stop:
            tail = self._tokenizer.decode(r.tokens[-32:], skip_special_tokens=False)
            hit = next((s for s in r.request.params.stop if s in tail), None)
            if hit is not None:
                r.done, r.finish, r.stop_reason = True, "stop", hit
        if not r.done and len(r.tokens) >= r.limit:
            r.done, r.finish = True, "length"


def processed_logprobs(logits: Any, params: SamplingParams) -> Any:
    """Log-probabilities of the distribution sampled from: temperature, top-k, top-p. [..., V]"""
    torch = _torch()
    if params.temperature == 0:
        return torch.log_softmax(logits, dim=-1)
    scaled = logits / params.temperature
    if params.top_k and params.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, params.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # keep the smallest prefix whose mass reaches top_p (the first token always stays)
        drop = probs.cumsum(-1) - probs >= params.top_p
        scaled = scaled.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return torch.log_softmax(scaled, dim=-1)


def sample_tokens(logits: Any, params: SamplingParams, uniforms: list[float]) -> tuple[Any, Any]:
    """Tokens [B] from ``logits`` [B, V] by inverse CDF at ``uniforms`` (one per row, in
    [0, 1)), and their logprobs [B] under the processed distribution. Greedy when
    temperature is 0 (the logprob is then the plain temperature-1 one)."""
    torch = _torch()
    logprobs = processed_logprobs(logits, params)  # [B, V]
    if params.temperature == 0:
        tokens = torch.argmax(logits, dim=-1)
    else:
        cdf = logprobs.exp().cumsum(-1)  # [B, V]
        u = torch.tensor(uniforms, dtype=cdf.dtype, device=cdf.device)[:, None] * cdf[:, -1:]
        # right=True: the first token whose cumulative mass exceeds u, so never a masked one
        tokens = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp(max=cdf.shape[-1] - 1)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def load_causal_lm(path: str, dtype: Any = None) -> Any:
    """The model in ``path``; a LoRA checkpoint's folder is its base with the adapters folded in."""
    if _is_adapter_folder(path):
        from peft import AutoPeftModelForCausalLM

        return AutoPeftModelForCausalLM.from_pretrained(path, dtype=dtype).merge_and_unload()
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)


def _is_adapter_folder(path: str) -> bool:
    folder = Path(path)
    return (folder / "adapter_config.json").is_file() and not (folder / "config.json").is_file()


def _default_path() -> str:
    try:
        from tracerl.models import tiny_model_path

        return str(tiny_model_path())
    except (ImportError, TracerlError):  # no bundled model: any other path is still fine
        return ""
