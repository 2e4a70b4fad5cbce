"""The engine interface: token ids in, token ids and their logprobs out.

Every engine (TorchEngine, VLLMEngine, UpstreamEngine) takes a prompt as token ids plus
sampling parameters and returns, per sample, the sampled token ids and the logprob of each
under the distribution actually sampled from (after temperature, top-k and top-p), the
finish reason, and the weight version that produced them. Chat templating lives in the
gateway, on the engine's tokenizer, so text is tokenized exactly once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """OpenAI-style sampling parameters. ``top_k=0`` and ``top_p=1`` disable those filters."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 1 <= self.n <= 64:
            raise ValueError(f"n must be between 1 and 64, got {self.n}")


FinishReason = Literal["stop", "length"]


@dataclass(slots=True)
class Generation:
    """One sample: ``token_ids[i]`` was drawn with log-probability ``logprobs[i]``."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    weight_version: int = 0
    # stop string that ended the sample (its tokens are kept, as vLLM does not; see gateway)
    stop_reason: str | int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """16 hex digits that change when token ids would: the vocabulary, merges and added tokens (a
    fast tokenizer's whole definition) and the chat template; not what leaves ids alone (which
    token pads). Recorded on every gateway span, so a trainer can tell its own ids from another
    model's."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    template = getattr(tokenizer, "chat_template", None) or ""
    return hashlib.sha256((body + "\x00" + template).encode()).hexdigest()[:16]


@runtime_checkable
class Engine(Protocol):
    """What the gateway and the trainer need from a policy server."""

    model_name: str
    weight_version: int

    @property
    def tokenizer(self) -> Any:
        """A Hugging Face tokenizer with ``apply_chat_template`` and ``decode``."""

    @property
    def max_context(self) -> int:
        """Prompt plus response tokens the model accepts."""

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> list[Generation]:
        """``params.n`` samples continuing ``prompt_ids``."""

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Load new policy weights; later generations carry ``version``."""

    async def close(self) -> None:
        """Release threads, memory and connections."""
