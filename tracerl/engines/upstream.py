"""UpstreamEngine: the gateway in front of another OpenAI-compatible server.

Two ways to forward, chosen by whether a tokenizer is given:

* **token mode** (``tokenizer=`` the upstream model's tokenizer): the gateway applies the
  chat template here and sends token ids to the upstream ``/v1/completions`` with vLLM's
  ``return_token_ids`` and ``logprobs``; the ids and logprobs come back exact. Use it with a
  vLLM server you train against.
* **chat passthrough** (no tokenizer): the request's messages go to the upstream
  ``/v1/chat/completions`` as they are (or through LiteLLM for a hosted provider, with
  ``provider="litellm"``). Token ids are recorded when the upstream returns them (vLLM does
  when asked); otherwise steps have none and are usable for evaluation and SFT only.

Training against your own vLLM server (``engine: openai``), ``weight_sync="disk"`` pushes new
weights as vLLM's RL routes allow a server on any GPU of the machine: the weights are written
as safetensors to ``weights_dir``, then ``POST /pause?mode=wait`` (in-flight requests
finish), ``POST /collective_rpc`` with ``reload_weights(weights_path=...)`` on every worker,
``POST /reset_prefix_cache`` and ``POST /resume``. Those routes exist when the server runs with
``VLLM_SERVER_DEV_MODE=1`` (docs/gpu.md has the command).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError, MissingDependencyError, UpstreamError

from .base import Generation, SamplingParams


def api_key_from_env(var: str | None, setting: str) -> str | None:
    """The API key held by environment variable ``var`` (None when no variable is named); a
    variable named but unset or empty is one line naming ``setting``, the flag that named it."""
    if not var:
        return None
    key = os.environ.get(var)
    if not key:
        raise ConfigError(f"{setting} {var}: that environment variable is not set")
    return key


class UpstreamEngine:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        tokenizer: Any | str | None = None,
        model_name: str | None = None,
        provider: str = "openai",
        max_context: int = 32768,
        timeout_s: float = 600.0,
        request_token_ids: bool = True,
        weight_sync: str = "none",
        weights_dir: str | None = None,
        weights_dtype: str = "auto",
    ):
        import httpx

        if provider not in ("openai", "litellm"):
            raise ConfigError(f"provider must be 'openai' or 'litellm', got {provider!r}")
        self.base_url = base_url.rstrip("/")
        self.upstream_model = model
        self.model_name = model_name or model
        self.provider = provider
        self.weight_version = 0
        self._max_context = max_context
        self.request_token_ids = request_token_ids
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        self._tokenizer = tokenizer
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout_s)
        self._api_key = api_key
        if weight_sync not in ("disk", "none"):
            raise ConfigError(f"weight_sync must be 'disk' or 'none', got {weight_sync!r}")
        if weight_sync == "disk" and not weights_dir:
            raise ConfigError("weight_sync='disk' needs weights_dir: a folder the server can read")
        self.weight_sync, self.weights_dir = weight_sync, weights_dir
        # the file is in the dtype the server runs (bfloat16 under bf16-mixed: half the bytes of
        # the trainer's float32 weights, to write and to read each step); "auto" keeps each tensor's
        self.weights_dtype = weights_dtype
        self._headers, self._timeout_s = headers, timeout_s

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def max_context(self) -> int:
        return self._max_context

    @property
    def passthrough(self) -> bool:
        """True when requests are forwarded as chat messages (no local tokenizer)."""
        return self._tokenizer is None

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self._client.post(path, json=body)
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:500]
            raise UpstreamError(response.status_code, f"upstream {self.base_url}{path}: {message}")
        return response.json()

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> list[Generation]:
        """Token mode: continue ``prompt_ids`` on the upstream's completions endpoint."""
        body: dict[str, Any] = {
            "model": self.upstream_model, "prompt": prompt_ids, "max_tokens": params.max_tokens,
            "temperature": params.temperature, "top_p": params.top_p, "n": params.n, "logprobs": 1,
            "return_token_ids": True,
        }
        if params.top_k:
            body["top_k"] = params.top_k
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        doc = await self._post("/completions", body)
        out = []
        for choice in doc.get("choices", []):
            ids = choice.get("token_ids")
            lps = (choice.get("logprobs") or {}).get("token_logprobs")
            if ids is None or lps is None or len(ids) != len(lps):
                raise UpstreamError(502, "the upstream returned no token ids/logprobs; token mode needs a "
                                         "vLLM-compatible server (return_token_ids) or use chat passthrough")
            finish = "length" if choice.get("finish_reason") == "length" else "stop"
            out.append(Generation(list(ids), [float(x) for x in lps], finish, self.weight_version,  # type: ignore[arg-type]
                                  choice.get("stop_reason")))
        return out

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """Passthrough: forward an OpenAI chat request; returns the upstream's response document."""
        body = {**body, "model": self.upstream_model, "stream": False}
        body.pop("stream_options", None)
        if self.provider == "litellm":
            return await self._litellm(body)
        if self.request_token_ids:
            body.setdefault("return_token_ids", True)
            body.setdefault("logprobs", True)
        return await self._post("/chat/completions", body)

    async def _litellm(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            import litellm
        except ImportError as exc:
            raise MissingDependencyError("litellm", "litellm", "A LiteLLM upstream") from exc
        kwargs = {k: v for k, v in body.items() if k not in ("return_token_ids",)}
        response = await litellm.acompletion(api_base=self.base_url or None, api_key=self._api_key, **kwargs)
        return response.model_dump()

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Push new weights to the server (``weight_sync="disk"``); later generations carry
        ``version``. With ``"none"`` the server keeps its weights and the version stays."""
        if self.weight_sync == "none":
            return
        import httpx

        from . import weights_file

        folder = Path(str(self.weights_dir))
        folder.mkdir(parents=True, exist_ok=True)
        weights_file.save(state_dict, folder / "model.safetensors", self.weights_dtype)
        root = self.base_url.removesuffix("/v1")
        with httpx.Client(base_url=root, headers=self._headers, timeout=self._timeout_s) as client:
            for path, body in (("/pause?mode=wait", None),
                               ("/collective_rpc", {"method": "reload_weights",
                                                    "kwargs": {"weights_path": str(folder)}}),
                               ("/reset_prefix_cache", None), ("/resume", None)):
                response = client.post(path, json=body)
                if response.status_code >= 400:
                    hint = " (is the server running with VLLM_SERVER_DEV_MODE=1?)" if response.status_code == 404 else ""
                    raise UpstreamError(response.status_code, f"weight sync: {root}{path} answered "
                                        f"{response.status_code}: {response.text[:300]}{hint}")
        self.weight_version = int(version)

    async def close(self) -> None:
        await self._client.aclose()
